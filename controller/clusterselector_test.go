package controller

import (
	"context"
	"errors"
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

// TestClusterLockSelectorPass (docs/contract.md rules 13 and 22): a pass
// labels every Namespace a selector ClusterLock matches, sweeps the label
// off one relabelled out of it, and writes status.protected and Active; a
// misspelled kind is InvalidTarget with "did you mean", and still covers
// what its other kinds match; a selector ClusterLock is looked at again
// every clusterLockRecheck (later matches); a second pass over a steady
// cluster writes nothing.
func TestClusterLockSelectorPass(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	s := clusterLockScheme(t)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}, lockv1alpha1.GroupVersion})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	sel := func(name string, kinds ...string) *lockv1alpha1.ClusterLock {
		return &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.ClusterLockSpec{
			Selector: &lockv1alpha1.ClusterLockSelector{Kinds: kinds, MatchLabels: map[string]string{"tier": "prod"}}, Reason: "prod"}}
	}
	labelled := map[string]string{"tier": "prod", lockv1alpha1.ClusterLockedLabel: "true"}
	writes := 0
	c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithStatusSubresource(&lockv1alpha1.ClusterLock{}).
		WithObjects(sel("keep-prod", "Namespace"), sel("typo", "Namespaces", "Namespace"),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"tier": "prod"}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: labelled}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "out", Labels: map[string]string{"tier": "dev", lockv1alpha1.ClusterLockedLabel: "true"}}},
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, obj, patch, opts...)
		}, SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	r := &clusterLocks{status: &reconciler{client: c}, client: c, api: c, mapper: mapper, guard: true, now: func() time.Time { return now }}
	for pass := 1; pass <= 2; pass++ {
		writes = 0
		res, err := r.Reconcile(context.Background(), clusterLockKey)
		if err != nil {
			t.Fatalf("pass %d: %v", pass, err)
		}
		if res.RequeueAfter != clusterLockRecheck {
			t.Errorf("pass %d: requeue after %s; want %s", pass, res.RequeueAfter, clusterLockRecheck)
		}
		// Pass 1: label a, unlabel out, two statuses; pass 2: nothing.
		if want := map[int]int{1: 4, 2: 0}[pass]; writes != want {
			t.Errorf("pass %d: %d writes; want %d", pass, writes, want)
		}
	}
	for name, want := range map[string]bool{"a": true, "b": true, "out": false, "other": false} {
		var ns corev1.Namespace
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &ns); err != nil {
			t.Fatal(err)
		}
		if got := ns.Labels[lockv1alpha1.ClusterLockedLabel] == "true"; got != want {
			t.Errorf("namespace %s labelled %t; want %t", name, got, want)
		}
	}
	for name, w := range map[string]struct{ reason, says string }{
		"keep-prod": {lockv1alpha1.ReasonActive, "deleting the objects this ClusterLock's selector matches is denied while this ClusterLock exists"},
		"typo":      {lockv1alpha1.ReasonInvalidTarget, `selector.kinds: no kind "Namespaces" is served for cluster-scoped objects; did you mean Namespace?`},
	} {
		var got lockv1alpha1.ClusterLock
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		ready := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReady)
		if ready == nil || ready.Reason != w.reason || !strings.Contains(ready.Message, w.says) || got.Status.Active != (w.reason == lockv1alpha1.ReasonActive) {
			t.Errorf("ClusterLock %s status %+v; want Ready %s with %q", name, got.Status, w.reason, w.says)
		}
		if p := got.Status.Protected; p == nil || p.Count != 2 || len(p.Resources) != 2 || p.Resources[0].Name != "a" || p.Resources[1].Name != "b" {
			t.Errorf("ClusterLock %s status.protected %+v; want Namespaces a and b", name, p)
		}
	}
}

// TestClusterLockSelectorReadFails: when what a selector ClusterLock
// matches cannot be listed, the pass errs (and is retried) and sweeps
// nothing: the label of a Namespace it protects stays, so its delete
// still reaches lockguard (a locked object is never unlabelled by a
// failed read).
func TestClusterLockSelectorReadFails(t *testing.T) {
	s := clusterLockScheme(t)
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Version: "v1"}})
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	lock := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "keep-prod"}, Spec: lockv1alpha1.ClusterLockSpec{
		Selector: &lockv1alpha1.ClusterLockSelector{Kinds: []string{"Namespace"}, MatchLabels: map[string]string{"tier": "prod"}}}}
	c := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithStatusSubresource(&lockv1alpha1.ClusterLock{}).
		WithObjects(lock, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"tier": "prod", lockv1alpha1.ClusterLockedLabel: "true"}}}).
		WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			o := (&client.ListOptions{}).ApplyOptions(opts)
			if o.LabelSelector != nil && strings.Contains(o.LabelSelector.String(), "tier") {
				return errors.New("connection refused")
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	r := &clusterLocks{status: &reconciler{client: c}, client: c, api: c, mapper: mapper, guard: true, now: time.Now}
	if _, err := r.Reconcile(context.Background(), clusterLockKey); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("pass: %v; want the list's error", err)
	}
	var ns corev1.Namespace
	if err := c.Get(context.Background(), client.ObjectKey{Name: "a"}, &ns); err != nil || ns.Labels[lockv1alpha1.ClusterLockedLabel] != "true" {
		t.Errorf("namespace a after a failed pass: %v, labels %v; want the label kept", err, ns.Labels)
	}
}
