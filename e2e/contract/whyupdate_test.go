package contract_test

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestWhyUpdateForTheAsker (docs/contract.md rule 16, issue 40): `kubectl
// lock why` answers whether an update of a frozen resource is refused for
// the user who asks, from lockguard's update guard with that user's
// identity and the installation's exemptions: the exempt navique operator
// is told its update would be allowed, a person that it would be refused
// with the update guard's message; and each answer is what that user's
// own dry-run update gets.
func TestWhyUpdateForTheAsker(t *testing.T) {
	ns := kube.NewNamespace(t, "whyupd")
	deleteLocksAtEnd(t, ns)
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	freeze := framework.NewLock(ns, "freeze", "Stack", "db", "")
	freeze.Spec.Level = lockv1alpha1.LevelReadOnly
	freeze = kube.CreateLock(t, freeze)
	waitReadOnly(t, freeze, lockv1alpha1.ReasonInForce)
	waitLabel(t, ns, "db", true)

	// What why reads, as each user: the group's objects and the Locks.
	const person = "jane@example.com"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "why-reader"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "update", "patch"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "why-reader"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: person},
			{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: naviqueOperator}}}
	for _, o := range []client.Object{role, binding} {
		if err := kube.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	operator := kube.Impersonate(t, restConfig(t), ns, "db", naviqueOperator, "system:serviceaccounts")
	jane := kube.Impersonate(t, restConfig(t), ns, "db", person)
	specChange := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":"large"}}`))

	w := kubectlWhy(t, "stack/db", "-n", ns, "--as", naviqueOperator, "--as-group", "system:serviceaccounts", "--as-group", "system:authenticated")
	if u := w.Update; u == nil || !u.Frozen || !u.InForce || !u.Asked || u.Refused || u.User != naviqueOperator || u.Answer != "allowed" {
		t.Errorf("why stack/db as the exempt %s: update %+v; want frozen and in force, but not refused for it", naviqueOperator, w.Update)
	}
	if err := operator.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "db"), specChange, client.DryRunAll); err != nil {
		t.Errorf("the exempt %s's dry-run spec change: %v; want it allowed, as why says", naviqueOperator, err)
	}

	w = kubectlWhy(t, "stack/db", "-n", ns, "--as", person, "--as-group", "system:authenticated")
	wantDenial := webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*freeze}, "metadata.annotations[kubectl-lock.core.navique.com/why]")
	if u := w.Update; u == nil || !u.Frozen || !u.Asked || !u.Refused || u.User != person || !strings.HasSuffix(u.Answer, "denied the request: "+wantDenial) {
		t.Errorf("why stack/db as %s: update %+v; want refused for them with %q", person, w.Update, wantDenial)
	}
	wantRefused(t, jane.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "db"), specChange, client.DryRunAll),
		webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*freeze}, "spec"))
}
