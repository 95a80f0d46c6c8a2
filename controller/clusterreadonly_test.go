package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestClusterReadOnlyPass (docs/contract.md rules 16 and 22): a pass labels
// the target of a live ReadOnly ClusterLock read-only and says InForce;
// takes the label off a Namespace whose ClusterLock is CanNotDelete, keeps
// it on one a ClusterLock's create marked a moment ago; labels an audit
// ReadOnly ClusterLock's target, whose condition says Audit; a second pass
// writes nothing (a steady cluster gets no writes). Without the update
// guard, or the ClusterLock guard, the ReadOnly condition says
// GuardDisabled.
func TestClusterReadOnlyPass(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	s := clusterLockScheme(t)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	cl := func(name, target string, level lockv1alpha1.LockLevel) *lockv1alpha1.ClusterLock {
		return &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.ClusterLockSpec{
			TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: target}, Level: level}}
	}
	locked := map[string]string{lockv1alpha1.ClusterLockedLabel: "true"}
	frozen := map[string]string{lockv1alpha1.ClusterLockedLabel: "true", lockv1alpha1.ReadOnlyLabel: "true"}
	// An audit ReadOnly ClusterLock's target is labelled too: its updates
	// reach lockguard, which warns of them (rule 20).
	audit := cl("watch-audit", "audit", lockv1alpha1.LevelReadOnly)
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	for _, tc := range []struct {
		name                     string
		guard, readOnlyGuard     bool
		condition                string
		prodLabelled, calmFrozen bool
	}{
		{"guards on", true, true, lockv1alpha1.ReasonInForce, true, false},
		{"no update guard", true, false, lockv1alpha1.ReasonGuardDisabled, true, false},
		{"no ClusterLock guard", false, true, lockv1alpha1.ReasonGuardDisabled, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := []client.Object{
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{}}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "calm", Labels: frozen}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fresh", Labels: frozen,
					Annotations: map[string]string{lockv1alpha1.ClusterLockPendingAnnotation: now.Add(-time.Second).Format(time.RFC3339)}}},
				&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "audit"}},
				cl("freeze-prod", "prod", lockv1alpha1.LevelReadOnly), cl("keep-calm", "calm", lockv1alpha1.LevelCanNotDelete), audit,
			}
			var writes []string
			c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithObjects(objs...).WithStatusSubresource(&lockv1alpha1.ClusterLock{}).
				WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					writes = append(writes, obj.GetName())
					return c.Patch(ctx, obj, patch, opts...)
				}, SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
					writes = append(writes, obj.GetName()+"/"+sub)
					return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
				}}).Build()
			r := &clusterLocks{status: &reconciler{client: c, readOnlyGuard: tc.readOnlyGuard}, client: c, api: c, mapper: mapper, guard: tc.guard, now: func() time.Time { return now }}
			if _, err := r.Reconcile(context.Background(), clusterLockKey); err != nil {
				t.Fatal(err)
			}
			var got lockv1alpha1.ClusterLock
			if err := c.Get(context.Background(), client.ObjectKey{Name: "freeze-prod"}, &got); err != nil {
				t.Fatal(err)
			}
			if ro := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReadOnly); ro == nil || ro.Reason != tc.condition {
				t.Errorf("ReadOnly condition %+v; want %s", ro, tc.condition)
			}
			wantLabels := map[string]map[string]string{"prod": frozen, "calm": locked, "fresh": frozen, "audit": frozen}
			if !tc.prodLabelled {
				wantLabels = map[string]map[string]string{"prod": {}, "calm": {}, "fresh": frozen, "audit": {}}
			}
			if err := c.Get(context.Background(), client.ObjectKey{Name: audit.Name}, &got); err != nil {
				t.Fatal(err)
			}
			if ro := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReadOnly); tc.guard && tc.readOnlyGuard &&
				(ro == nil || ro.Reason != lockv1alpha1.ReasonAudit || !strings.Contains(ro.Message, "recorded in status.lastWouldDeny")) {
				t.Errorf("the audit ClusterLock's ReadOnly condition %+v; want Audit, recorded in lastWouldDeny", ro)
			}
			for name, want := range wantLabels {
				var ns corev1.Namespace
				if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &ns); err != nil {
					t.Fatal(err)
				}
				if len(ns.Labels) != len(want) || ns.Labels[lockv1alpha1.ReadOnlyLabel] != want[lockv1alpha1.ReadOnlyLabel] ||
					ns.Labels[lockv1alpha1.ClusterLockedLabel] != want[lockv1alpha1.ClusterLockedLabel] {
					t.Errorf("Namespace %s labels %v; want %v", name, ns.Labels, want)
				}
			}
			writes = nil
			if _, err := r.Reconcile(context.Background(), clusterLockKey); err != nil {
				t.Fatal(err)
			}
			if len(writes) > 0 {
				t.Errorf("the second pass wrote %v; want nothing", writes)
			}
		})
	}
}
