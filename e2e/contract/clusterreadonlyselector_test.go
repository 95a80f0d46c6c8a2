package contract_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestClusterReadOnlySelector (docs/contract.md rules 15, 16 and 22): a
// ReadOnly ClusterLock by label selector freezes every Namespace it
// matches from its create's answer on (a person's change sent right after
// the create returns is refused naming it), says InForce, keeps a person
// from relabelling a Namespace out of its selector (a frozen label), and
// freezes a Namespace created into the selector later once lockguard
// labels it; a Namespace it does not match is left alone; once it is
// deleted the labels go and the change goes through.
func TestClusterReadOnlySelector(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	admin := withCRDs(t)
	suffix := rand.String(5)
	sel := map[string]string{"cro-sel": suffix}
	newNS := func(name string, labels map[string]string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if err := admin.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.Background(), ns) })
		return ns
	}
	first := newNS("cros-a-"+suffix, sel)
	other := newNS("cros-free-"+suffix, nil)

	person := "cros-user-" + suffix
	bindCluster(t, person, clusterRole(t, "cros-update-"+suffix,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "update", "patch"}}))
	as := impersonateWith(t, admin, person)
	patch := func(name, body string) error {
		return as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(body)))
	}
	const change = `{"metadata":{"annotations":{"note":"x"}}}`

	cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "cros-" + suffix},
		Spec: lockv1alpha1.ClusterLockSpec{Selector: &lockv1alpha1.ClusterLockSelector{Kinds: []string{"Namespace"}, MatchLabels: sel},
			Reason: "change window", Level: lockv1alpha1.LevelReadOnly}}
	if err := kube.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	deleted := false
	t.Cleanup(func() {
		if !deleted {
			_ = kube.Client.Delete(context.Background(), cl)
		}
	})
	refusal := func(name, field string) string {
		return webhook.ClusterUpdateDenialMessage("Namespace", name, []lockv1alpha1.ClusterLock{*cl}, field)
	}
	// Right after the create's answer: the create put the labels on.
	wantRefused(t, patch(first.Name, change), refusal(first.Name, "metadata.annotations[note]"))

	kube.WaitClusterLock(t, cl.Name, lockv1alpha1.ReasonActive, "")
	waitClusterReadOnly(t, cl.Name, lockv1alpha1.ReasonInForce)
	wantRefused(t, patch(first.Name, `{"metadata":{"labels":{"cro-sel":null}}}`), refusal(first.Name, "metadata.labels[cro-sel]"))
	if err := patch(other.Name, change); err != nil {
		t.Errorf("a change of Namespace %s, which the selector does not match: %v", other.Name, err)
	}

	later := newNS("cros-b-"+suffix, sel)
	framework.Eventually(t, framework.DefaultTimeout, "Namespace "+later.Name+", created into the selector, frozen", func(ctx context.Context) error {
		if err := readOnlyLabelled(admin, later, true)(ctx); err != nil {
			return err
		}
		err := patch(later.Name, change)
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("a person's change of %s: %v, want it refused", later.Name, err)
		}
		return nil
	})
	wantRefused(t, patch(later.Name, change), refusal(later.Name, "metadata.annotations[note]"))

	if err := kube.Client.Delete(ctx, cl); err != nil {
		t.Fatal(err)
	}
	deleted = true
	for _, ns := range []*corev1.Namespace{first, later} {
		framework.Eventually(t, framework.DefaultTimeout, "Namespace "+ns.Name+" unfrozen", func(ctx context.Context) error {
			if err := readOnlyLabelled(admin, ns, false)(ctx); err != nil {
				return err
			}
			return patch(ns.Name, change)
		})
	}
}
