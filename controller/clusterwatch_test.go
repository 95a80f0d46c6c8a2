package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// The cluster-scoped kinds of the tests below, as an API server serves them.
var (
	namespaceKind = readmodel.ServedKind{GVK: corev1.SchemeGroupVersion.WithKind("Namespace"), Resource: schema.GroupResource{Resource: "namespaces"}}
	roleKind      = readmodel.ServedKind{GVK: schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
		Resource: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}}
)

// clusterSelector is a selector ClusterLock named name on the objects of
// kinds labelled tier=prod.
func clusterSelector(name string, kinds ...string) *lockv1alpha1.ClusterLock {
	return &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.ClusterLockSpec{
		Selector: &lockv1alpha1.ClusterLockSelector{Kinds: kinds, MatchLabels: map[string]string{"tier": "prod"}}, Reason: "prod"}}
}

// TestClusterObjectEvents: an object of a watched kind brings a pass when
// it is created into a live selector of its kind, or labelled into or out
// of one; not when it is created or relabelled outside every selector,
// when only labels the selectors do not read change, when no live
// selector names its kind, or when it is deleted.
func TestClusterObjectEvents(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	expired := clusterSelector("expired", "ClusterRole")
	expired.Spec.Selector.MatchLabels = map[string]string{"tier": "old"}
	expired.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Minute)}
	deleting := clusterSelector("deleting", "ClusterRole")
	deleting.Spec.Selector.MatchLabels = map[string]string{"tier": "gone"}
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	team := clusterSelector("team", "ClusterRole")
	team.Spec.Selector.MatchLabels = nil
	team.Spec.Selector.MatchExpressions = []lockv1alpha1.LabelSelectorRequirement{{Key: "team", Operator: lockv1alpha1.SelectorOpIn, Values: []string{"platform"}}}
	locks := []lockv1alpha1.ClusterLock{*clusterSelector("prod", "ClusterRole", "Namespace"), *team, *expired, *deleting,
		{ObjectMeta: metav1.ObjectMeta{Name: "by-name"}, Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: "x"}}}}
	live, keys := liveSelectorsOf(locks, now)
	if diff := cmp.Diff([]string{"team", "tier"}, slices.Sorted(slices.Values(keys))); diff != "" {
		t.Errorf("the keys of the live selectors: -want, +got:\n%s", diff)
	}
	role := roleKind.GVK.GroupKind()
	lbl := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for name, tc := range map[string]struct {
		gk       schema.GroupKind
		old, new map[string]string // old nil: a create
		deleted  bool
		pass     bool
	}{
		"CreatedInto":             {gk: role, new: lbl("tier", "prod"), pass: true},
		"CreatedIntoExpression":   {gk: role, new: lbl("team", "platform"), pass: true},
		"NamespaceCreatedInto":    {gk: corev1.SchemeGroupVersion.WithKind("Namespace").GroupKind(), new: lbl("tier", "prod"), pass: true},
		"CreatedOutside":          {gk: role, new: lbl("tier", "dev")},
		"CreatedUnlabelled":       {gk: role, new: nil},
		"CreatedIntoExpired":      {gk: role, new: lbl("tier", "old")},
		"CreatedIntoDeleting":     {gk: role, new: lbl("tier", "gone")},
		"KindNotNamed":            {gk: schema.GroupKind{Group: "storage.k8s.io", Kind: "StorageClass"}, new: lbl("tier", "prod")},
		"LabelledInto":            {gk: role, old: lbl("tier", "dev"), new: lbl("tier", "prod"), pass: true},
		"LabelAddedInto":          {gk: role, old: lbl(), new: lbl("tier", "prod"), pass: true},
		"LabelledOut":             {gk: role, old: lbl("tier", "prod"), new: lbl("tier", "dev"), pass: true},
		"StillIn":                 {gk: role, old: lbl("tier", "prod"), new: lbl("tier", "prod", "team", "platform")},
		"StillOut":                {gk: role, old: lbl("tier", "dev"), new: lbl("tier", "qa")},
		"UpdatedWithoutLabels":    {gk: role, old: lbl("tier", "prod"), new: lbl("tier", "prod")},
		"DeletedWhileSelected":    {gk: role, old: lbl("tier", "prod"), new: lbl("tier", "prod"), deleted: true},
		"LabelledIntoUnnamedKind": {gk: schema.GroupKind{Group: "storage.k8s.io", Kind: "StorageClass"}, old: lbl(), new: lbl("tier", "prod")},
	} {
		t.Run(name, func(t *testing.T) {
			h := clusterObjectEvents{gk: tc.gk, live: func() liveSelectors { return live }}
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			obj := func(l map[string]string) *metav1.PartialObjectMetadata {
				return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "o", Labels: l}}
			}
			switch {
			case tc.deleted:
				h.Delete(t.Context(), event.TypedDeleteEvent[*metav1.PartialObjectMetadata]{Object: obj(tc.new)}, q)
			case tc.old == nil:
				h.Create(t.Context(), event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: obj(tc.new)}, q)
			default:
				h.Update(t.Context(), event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: obj(tc.old), ObjectNew: obj(tc.new)}, q)
			}
			if got := q.Len() == 1; got != tc.pass {
				t.Errorf("a pass enqueued: %t; want %t", got, tc.pass)
			}
		})
	}
}

// removingCache is a metadataCache that records the informers removed
// (and keeps handing them out, as a cache starts one afresh).
type removingCache struct {
	*metadataCache
	removed []schema.GroupVersionKind
}

func (c *removingCache) RemoveInformer(_ context.Context, obj client.Object) error {
	c.removed = append(c.removed, obj.GetObjectKind().GroupVersionKind())
	return nil
}

// watchCounter is a started ClusterLock controller that counts the
// watches added to it.
type watchCounter struct {
	controller.Controller
	watches int
}

func (c *watchCounter) Watch(source.TypedSource[reconcile.Request]) error {
	c.watches++
	return nil
}

// clusterMapper serves Namespace and ClusterRole, cluster-scoped, and
// Stack, namespaced.
func clusterMapper() meta.RESTMapper {
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{namespaceKind.GVK.GroupVersion(), roleKind.GVK.GroupVersion(), stackKind.GVK.GroupVersion()})
	mapper.Add(namespaceKind.GVK, meta.RESTScopeRoot)
	mapper.Add(roleKind.GVK, meta.RESTScopeRoot)
	mapper.Add(stackKind.GVK, meta.RESTScopeNamespace)
	return mapper
}

// TestClusterWatchesTrack: a pass watches each kind a live selector
// ClusterLock names that is served for cluster-scoped objects, once its
// informer has synced (until then it says so, and the pass comes back
// soon), never twice; it sets the label keys the cache keeps; once no live
// selector names a kind, its informer is removed from the cache (the
// Namespace informer, which the namespace guard shares, never is), and a
// kind named again is watched afresh.
func TestClusterWatchesTrack(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	c := &removingCache{metadataCache: newMetadataCache(t)}
	c.add(namespaceKind, true)
	c.add(roleKind, false)
	ctl := &watchCounter{}
	keys := &readmodel.ClusterLabelKeys{}
	w := newClusterWatches(c, ctl, clusterMapper(), keys)
	// Widget is not served, Stack is namespaced: neither is watched.
	locks := []lockv1alpha1.ClusterLock{*clusterSelector("prod", "Namespace", "ClusterRole", "Widget", "Stack")}
	watched := func() []string {
		var out []string
		for _, k := range w.watchedKinds() {
			out = append(out, k.GVK.Kind)
		}
		slices.Sort(out)
		return out
	}
	check := func(step string, wantUnsynced bool, wantWatched []string, wantWatches int, wantRemoved ...schema.GroupVersionKind) {
		t.Helper()
		unsynced, err := w.track(t.Context(), locks, now)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if unsynced != wantUnsynced {
			t.Errorf("%s: unsynced %t; want %t", step, unsynced, wantUnsynced)
		}
		if diff := cmp.Diff(wantWatched, watched()); diff != "" {
			t.Errorf("%s: watched -want, +got:\n%s", step, diff)
		}
		if ctl.watches != wantWatches {
			t.Errorf("%s: %d watches added in all; want %d", step, ctl.watches, wantWatches)
		}
		if diff := cmp.Diff(wantRemoved, c.removed); diff != "" {
			t.Errorf("%s: informers removed -want, +got:\n%s", step, diff)
		}
	}
	check("ClusterRole not synced", true, []string{"Namespace"}, 1)
	if diff := cmp.Diff([]string{"tier"}, keys.Keys()); diff != "" {
		t.Errorf("label keys kept: -want, +got:\n%s", diff)
	}
	c.informers[roleKind.GVK].synced.Store(true)
	check("ClusterRole synced", false, []string{"ClusterRole", "Namespace"}, 2)
	check("again", false, []string{"ClusterRole", "Namespace"}, 2)

	locks = nil // the ClusterLock deleted
	check("no ClusterLock", false, []string{"Namespace"}, 2, roleKind.GVK)
	if got := keys.Keys(); got != nil {
		t.Errorf("label keys kept with no ClusterLock: %q; want none", got)
	}
	if live := w.selectors(); len(live) != 0 {
		t.Errorf("live selectors with no ClusterLock: %v; want none", live)
	}
	locks = []lockv1alpha1.ClusterLock{*clusterSelector("roles", "ClusterRole")}
	check("named again", false, []string{"ClusterRole", "Namespace"}, 3, roleKind.GVK)
}

// TestClusterLockPassTracksWatches: the pass watches the kinds its live
// selector ClusterLocks name before it lists what they match, comes back
// within unsyncedRetry while one has not synced (instead of
// clusterLockRecheck), and a second pass over a steady cluster writes
// nothing and adds no watch; with the guard off nothing is watched.
func TestClusterLockPassTracksWatches(t *testing.T) {
	now := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	s := clusterLockScheme(t)
	mapper := clusterMapper()
	writes := 0
	cl := fake.NewClientBuilder().WithScheme(s).WithRESTMapper(mapper).WithStatusSubresource(&lockv1alpha1.ClusterLock{}).
		WithObjects(clusterSelector("prod", "Namespace", "ClusterRole"),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"tier": "prod"}}}).
		WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			writes++
			return c.Patch(ctx, obj, patch, opts...)
		}, SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			writes++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		}}).Build()
	cache := &removingCache{metadataCache: newMetadataCache(t)}
	cache.add(namespaceKind, true)
	cache.add(roleKind, false)
	ctl := &watchCounter{}
	keys := &readmodel.ClusterLabelKeys{}
	r := &clusterLocks{status: &reconciler{client: cl}, client: cl, api: cl, mapper: mapper, guard: true, now: func() time.Time { return now },
		watches: newClusterWatches(cache, ctl, mapper, keys)}
	pass := func(want time.Duration) {
		t.Helper()
		res, err := r.Reconcile(t.Context(), clusterLockKey)
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != want {
			t.Errorf("requeue after %s; want %s", res.RequeueAfter, want)
		}
	}
	pass(unsyncedRetry)
	if ctl.watches != 1 || !slices.Equal(keys.Keys(), []string{"tier"}) {
		t.Errorf("after the first pass: %d watches, label keys %q; want the Namespace watch and tier", ctl.watches, keys.Keys())
	}
	cache.informers[roleKind.GVK].synced.Store(true)
	pass(clusterLockRecheck)
	writes = 0
	pass(clusterLockRecheck)
	if writes != 0 || ctl.watches != 2 {
		t.Errorf("a pass over a steady cluster: %d writes, %d watches in all; want 0 writes and the 2 watches", writes, ctl.watches)
	}
	r.guard = false
	pass(0) // GuardDisabled: no label, no recheck
	if diff := cmp.Diff([]schema.GroupVersionKind{roleKind.GVK}, cache.removed); diff != "" || keys.Keys() != nil {
		t.Errorf("guard off: informers removed -want, +got:\n%s; label keys %q, want none", diff, keys.Keys())
	}
}
