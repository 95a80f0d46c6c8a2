//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// Test22ClusterLockOutage (docs/contract.md rule 22) runs the built binary's
// replicas: ClusterLocks on a Namespace that holds no Lock and on a
// cluster-scoped core.navique.com Region become Active and refuse their
// targets' deletes. With every replica stopped, only the deletes of those
// cluster-locked objects fail closed (and the removal of their label):
// another namespace and another Region are deleted, and so are both
// ClusterLocks. Once lockguard runs again, its first pass (no ClusterLock
// is left to bring one) removes the labels, and the targets are deleted.
func Test22ClusterLockOutage(t *testing.T) {
	ctx := t.Context()
	suffix := rand.String(5)
	n := replicaCount(t)
	locked := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-clk-" + suffix}}
	free := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-clk-free-" + suffix}}
	region := framework.Object(framework.RegionGVK, "", "e2e-clk-"+suffix)
	freeRegion := framework.Object(framework.RegionGVK, "", "e2e-clk-free-"+suffix)
	for _, o := range []client.Object{locked, free, region, freeRegion} {
		if err := kube.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), o) })
	}
	lock := func(name, apiVersion, kind, target string) *lockv1alpha1.ClusterLock {
		cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + suffix}, Spec: lockv1alpha1.ClusterLockSpec{
			TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: apiVersion, Kind: kind, Name: target}, Reason: "e2e"}}
		if err := kube.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), cl) })
		return cl
	}
	nsLock := lock("keep-ns", "v1", "Namespace", locked.Name)
	regionLock := lock("keep-region", "core.navique.com/v1alpha1", "Region", region.GetName())
	for _, cl := range []*lockv1alpha1.ClusterLock{nsLock, regionLock} {
		kube.WaitClusterLock(t, cl.Name, lockv1alpha1.ReasonActive, "")
	}
	for _, o := range []client.Object{locked, region} {
		if err := kube.Client.Delete(ctx, o, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is protected by ClusterLock(s)") {
			t.Fatalf("deleting %s while lockguard runs: %v; want Forbidden by a ClusterLock", o.GetName(), err)
		}
	}

	d := scale(t, 0)
	t.Logf("lockguard stopped in %s", d.Round(time.Millisecond))
	failClosed := func(err error, entry string) {
		t.Helper()
		prefix := fmt.Sprintf("Internal error occurred: failed calling webhook %q: failed to call webhook: ", entry)
		if err == nil || !apierrors.IsInternalError(err) || !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("got %v; want an InternalError starting with %q", err, prefix)
		}
	}
	failClosed(kube.Client.Delete(ctx, locked), "cluster-lock.lockguard.core.navique.com")
	failClosed(kube.Client.Delete(ctx, region), "cluster-lock.lockguard.core.navique.com")
	unlabel := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:null}}}`, lockv1alpha1.ClusterLockedLabel))
	failClosed(kube.Client.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: locked.Name}}, unlabel), "cluster-label.lockguard.core.navique.com")
	for _, o := range []client.Object{free, freeRegion} {
		if err := kube.Client.Delete(ctx, o); err != nil {
			t.Fatalf("deleting %s (no ClusterLock) while lockguard is down: %v", o.GetName(), err)
		}
	}
	for _, cl := range []*lockv1alpha1.ClusterLock{nsLock, regionLock} {
		if err := kube.Client.Delete(ctx, cl); err != nil {
			t.Fatalf("deleting a ClusterLock while lockguard is down: %v", err)
		}
	}

	// No ClusterLock is left to bring the reconciler a pass: its pass at
	// the start sweeps the labels.
	d = scale(t, n)
	t.Logf("lockguard ready again in %s", d.Round(time.Millisecond))
	for _, o := range []client.Object{locked, region} {
		framework.Eventually(t, framework.DefaultTimeout, o.GetName()+" unlabelled and deleted", func(ctx context.Context) error {
			gvk, err := kube.Client.GroupVersionKindFor(o)
			if err != nil {
				return err
			}
			m := &metav1.PartialObjectMetadata{}
			m.SetGroupVersionKind(gvk)
			if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(o), m); err != nil {
				return client.IgnoreNotFound(err)
			}
			if _, ok := m.Labels[lockv1alpha1.ClusterLockedLabel]; ok {
				return fmt.Errorf("%s still labelled %v", o.GetName(), m.Labels)
			}
			return client.IgnoreNotFound(kube.Client.Delete(ctx, o))
		})
	}
}

// Test22ClusterLockLabelForbidden (docs/contract.md rule 22) runs the built
// binary as lockguard's ServiceAccount, with the chart's RBAC (no escalate
// on clusterroles). Creating a ClusterLock on a ClusterRole that grants *
// on * (more than lockguard holds) is refused with the kubectl label
// command, since RBAC refuses lockguard the label. A ClusterLock created
// before such a role exists (MissingReference) says LabelForbidden with
// the command once the role is created; once an admin runs that command,
// it is Active and the role's delete is refused. A ClusterLock on a
// ClusterRole lockguard holds every permission of is labelled by lockguard.
// Once the ClusterLock is deleted, the stale label (whose removal RBAC
// refuses too) is left, and the role's delete is allowed.
func Test22ClusterLockLabelForbidden(t *testing.T) {
	ctx := t.Context()
	suffix := rand.String(5)
	everything := []rbacv1.PolicyRule{{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"*"}}}
	big := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-clk-big-" + suffix}, Rules: everything}
	refused := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-clk-refused-" + suffix}, Rules: everything}
	small := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "e2e-clk-small-" + suffix},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}}}}
	lockOn := func(role *rbacv1.ClusterRole) (*lockv1alpha1.ClusterLock, error) {
		cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Spec: lockv1alpha1.ClusterLockSpec{
			TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: role.Name}, Reason: "e2e"}}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), cl) })
		return cl, kube.Client.Create(ctx, cl)
	}
	create := func(role *rbacv1.ClusterRole) {
		if err := kube.Client.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), role) })
	}
	command := func(role *rbacv1.ClusterRole) string {
		return fmt.Sprintf("kubectl label clusterrole %s core.navique.com/cluster-locked=true", role.Name)
	}
	forbidden := func(role *rbacv1.ClusterRole) string {
		return fmt.Sprintf("lockguard cannot label ClusterRole %s without holding every permission it grants; run `%s` as someone who may", role.Name, command(role))
	}

	// The create of a ClusterLock on an existing role lockguard may not
	// label is refused.
	create(refused)
	if _, err := lockOn(refused); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), forbidden(refused)+", then create this ClusterLock again") {
		t.Fatalf("creating a ClusterLock on %s: %v; want Forbidden with %q", refused.Name, err, forbidden(refused))
	}

	// One created before its role says LabelForbidden once the role exists.
	bigLock, err := lockOn(big)
	if err != nil {
		t.Fatal(err)
	}
	kube.WaitClusterLock(t, big.Name, lockv1alpha1.ReasonMissingReference, "")
	create(big)
	kube.WaitClusterLock(t, big.Name, lockv1alpha1.ReasonLabelForbidden, forbidden(big))

	// A role lockguard holds entirely: labelled at the create.
	create(small)
	if _, err := lockOn(small); err != nil {
		t.Fatal(err)
	}
	labelled := func(role *rbacv1.ClusterRole) bool {
		var got rbacv1.ClusterRole
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(role), &got); err != nil {
			t.Fatal(err)
		}
		return got.Labels[lockv1alpha1.ClusterLockedLabel] == "true"
	}
	if labelled(big) || !labelled(small) {
		t.Fatalf("labels: %s %t, %s %t; want lockguard to label only %s", big.Name, labelled(big), small.Name, labelled(small), small.Name)
	}
	if err := kube.Client.Delete(ctx, small, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is protected by ClusterLock(s)") {
		t.Fatalf("deleting %s: %v; want Forbidden by its ClusterLock", small.Name, err)
	}
	kube.WaitClusterLock(t, small.Name, lockv1alpha1.ReasonActive, "")

	// The admin runs the command the status gives.
	if res := kube.Kubectl(t, "", strings.Fields(command(big))[1:]...); res.Code != 0 {
		t.Fatalf("%s: exit %d: %s", command(big), res.Code, res.Stderr)
	}
	kube.WaitClusterLock(t, big.Name, lockv1alpha1.ReasonActive, "")
	if err := kube.Client.Delete(ctx, big); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is protected by ClusterLock(s) ["+big.Name) {
		t.Fatalf("deleting %s once labelled: %v; want Forbidden by its ClusterLock", big.Name, err)
	}

	// The ClusterLock goes; lockguard may not remove the label, which is
	// left, and the delete is allowed.
	if err := kube.Client.Delete(ctx, bigLock); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.DefaultTimeout, big.Name+" deleted", func(ctx context.Context) error {
		return client.IgnoreNotFound(kube.Client.Delete(ctx, big))
	})
}
