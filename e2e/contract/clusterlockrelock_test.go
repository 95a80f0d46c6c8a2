package contract_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestClusterLockRelock (docs/contract.md rule 22): a Namespace whose
// ClusterLock is deleted and at once replaced by another (by name or by
// selector, in turn) stays protected from the new one's create on: a
// delete of the Namespace (a dry run, so that one Namespace serves every
// round) sent the moment the new create is answered is refused, every
// time. The old ClusterLock's delete sets off the reconciler's sweep of
// the label it leaves while the new create labels the Namespace again:
// the sequence of chaos-short's violation on dd98f50 (2026-12-04 17:14
// UTC). The interleaving that violation needs (the sweep's removal landing
// after the new create's label) is forced in the unit test
// TestClusterLockSweepRacesCreate; this test did not hit it on the code
// before the fix (2026-12-04 18:22-18:26 UTC, 1.37.2: 60, 60 and 200
// rounds, and 15 rounds behind 40 other Namespaces' sweeps, all refused),
// so it checks the sequence, not the race.
func TestClusterLockRelock(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	const rounds = 60
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clk-relock-" + suffix, Labels: map[string]string{"relock": suffix}}}
	if err := kube.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	byName := func(name string) *lockv1alpha1.ClusterLock {
		return &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.ClusterLockSpec{
			TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: ns.Name}, Reason: "relock"}}
	}
	var live *lockv1alpha1.ClusterLock
	t.Cleanup(func() {
		if live != nil {
			_ = kube.Client.Delete(context.Background(), live)
		}
		_ = kube.Client.Delete(context.Background(), ns)
	})
	live = byName(fmt.Sprintf("clk-relock-%s-0", suffix))
	if err := kube.Client.Create(ctx, live); err != nil {
		t.Fatal(err)
	}
	refused := 0
	for i := 1; i <= rounds; i++ {
		next := byName(fmt.Sprintf("clk-relock-%s-%d", suffix, i))
		if i%2 == 0 {
			next = selectorClusterLock(next.Name, "relock", suffix, "Namespace")
		}
		if err := kube.Client.Delete(ctx, live); err != nil {
			t.Fatal(err)
		}
		live = nil
		if err := kube.Client.Create(ctx, next); err != nil {
			t.Fatal(err)
		}
		live = next
		err := kube.Client.Delete(ctx, ns.DeepCopy(), client.DryRunAll)
		if !apierrors.IsForbidden(err) {
			how := "by name"
			if next.Spec.Selector != nil {
				how = "by selector"
			}
			t.Errorf("round %d: a dry-run delete of namespace %s sent right after ClusterLock %s's create (%s; the one before just deleted): %v; want Forbidden",
				i, ns.Name, next.Name, how, err)
			continue
		}
		refused++
	}
	t.Logf("%d of %d dry-run deletes sent right after a replacing ClusterLock's create refused", refused, rounds)
	// Once the last ClusterLock goes, the Namespace can be deleted.
	if err := kube.Client.Delete(ctx, live); err != nil {
		t.Fatal(err)
	}
	live = nil
	framework.Eventually(t, framework.DefaultTimeout, "namespace "+ns.Name+" deleted", func(ctx context.Context) error {
		return client.IgnoreNotFound(kube.Client.Delete(ctx, ns))
	})
}
