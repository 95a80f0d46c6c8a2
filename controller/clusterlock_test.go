package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestClusterLockPass: one pass over the ClusterLocks labels the target
// of the live one, sweeps the label off an object no ClusterLock names,
// and writes each status: Active, InvalidTarget for a kind a ClusterLock
// cannot name or a namespaced one, MissingReference for a missing
// target, Expired; with the guard off, GuardDisabled and no label (a
// status never claims protection lockguard does not give: rule 13).
func TestClusterLockPass(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, lockv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, lockv1alpha1.GroupVersion})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"}, meta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}, meta.RESTScopeNamespace)
	cl := func(name, apiVersion, kind, target string) *lockv1alpha1.ClusterLock {
		return &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.ClusterLockSpec{
			TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: apiVersion, Kind: kind, Name: target}, Reason: "prod"}}
	}
	expired := cl("old", "v1", "Namespace", "prod")
	expired.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Minute)}
	locks := []*lockv1alpha1.ClusterLock{cl("keep-prod", "v1", "Namespace", "prod"), cl("pod", "v1", "Pod", "p"),
		cl("stack", "core.navique.com/v1alpha1", "Stack", "s"), cl("gone", "v1", "Namespace", "absent"), expired}
	want := map[string]struct{ reason, says string }{
		"keep-prod": {lockv1alpha1.ReasonActive, `deleting Namespace "prod" is denied while this ClusterLock exists: prod`},
		"pod":       {lockv1alpha1.ReasonInvalidTarget, "a ClusterLock cannot protect a Pod"},
		"stack":     {lockv1alpha1.ReasonInvalidTarget, "Stack.core.navique.com is a namespaced kind"},
		"gone":      {lockv1alpha1.ReasonMissingReference, `Namespace "absent" not found`},
		"old":       {lockv1alpha1.ReasonExpired, "this ClusterLock expired at 2026-12-04T08:59:00Z"},
	}
	for _, guard := range []bool{true, false} {
		objs := []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod"}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "stale", Labels: map[string]string{lockv1alpha1.ClusterLockedLabel: "true"}}},
		}
		for _, l := range locks {
			objs = append(objs, l.DeepCopy())
		}
		c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...).WithStatusSubresource(&lockv1alpha1.ClusterLock{}).Build()
		r := &clusterLocks{status: &reconciler{client: c}, client: c, api: c, mapper: mapper, guard: guard, now: func() time.Time { return now }}
		if _, err := r.Reconcile(context.Background(), clusterLockKey); err != nil {
			t.Fatalf("guard %t: %v", guard, err)
		}
		for name, w := range want {
			if !guard && (name == "keep-prod" || name == "gone") {
				w.reason, w.says = lockv1alpha1.ReasonGuardDisabled, "lockguard runs without its ClusterLock guard"
			}
			var got lockv1alpha1.ClusterLock
			if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &got); err != nil {
				t.Fatal(err)
			}
			ready := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReady)
			if ready == nil || ready.Reason != w.reason || !strings.Contains(ready.Message, w.says) || got.Status.Active != (w.reason == lockv1alpha1.ReasonActive) {
				t.Errorf("guard %t: ClusterLock %s status %+v; want Ready %s with %q", guard, name, got.Status, w.reason, w.says)
			}
		}
		for ns, labelled := range map[string]bool{"prod": guard, "stale": false} {
			var n corev1.Namespace
			if err := c.Get(context.Background(), client.ObjectKey{Name: ns}, &n); err != nil {
				t.Fatal(err)
			}
			if got := n.Labels[lockv1alpha1.ClusterLockedLabel] == "true"; got != labelled {
				t.Errorf("guard %t: namespace %s labels %v; want labelled %t", guard, ns, n.Labels, labelled)
			}
		}
	}
}
