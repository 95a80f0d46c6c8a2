//go:build e2e

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// Test15SelectorLocks (docs/contract.md rule 15) against the binary, as the chart
// installs it, with the garbage collector and namespace controller
// running: a {} Lock denies deleting an object created after it (for
// real, not only as a dry run) and the namespace; a tier=db Lock covers an
// object labelled into it, not one labelled out, and refuses an owner's
// cascade onto a covered dependent.
func Test15SelectorLocks(t *testing.T) {
	ns := kube.NewNamespace(t, "selector")
	stack := func(name, tier string) {
		t.Helper()
		u := framework.Object(framework.StackGVK, ns, name)
		if tier != "" {
			u.SetLabels(map[string]string{"tier": tier})
		}
		if err := kube.Client.Create(t.Context(), u); err != nil {
			t.Fatalf("creating Stack %s: %v", name, err)
		}
	}
	relabel := func(name, tier string) {
		t.Helper()
		patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"tier":"`+tier+`"}}}`))
		if err := kube.Client.Patch(t.Context(), framework.Object(framework.StackGVK, ns, name), patch); err != nil {
			t.Fatalf("relabelling Stack %s: %v", name, err)
		}
	}
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}

	all := kube.CreateLock(t, framework.NewSelectorLock(ns, "all", lockv1alpha1.LockSelector{}))
	stack("later", "")
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "later"), all)
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace), webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, all))
	kube.WaitActive(t, all)
	kube.MustExist(t, framework.StackGVK, ns, "later")
	kube.DeleteLock(t, all)

	stack("db", "db")
	db := kube.CreateLock(t, framework.NewSelectorLock(ns, "tier-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}))
	kube.WaitActive(t, db)
	relabel("later", "db")
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "later", client.DryRunAll), db)
	relabel("db", "web")
	if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "db", client.DryRunAll); err != nil {
		t.Errorf("dry-run delete of Stack db relabelled out of tier=db: %v; want it allowed", err)
	}
	owner := kube.CreateObject(t, framework.StackGVK, ns, "owner")
	kube.CreateOwned(t, framework.StackGVK, ns, "child", owner)
	relabel("child", "db")
	kube.WaitCascadeDenied(t, framework.StackGVK, ns, "owner", kube.CascadeDenialError([]*lockv1alpha1.Lock{db}, "Stack/child"))
	kube.MustExist(t, framework.StackGVK, ns, "child")
}
