package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// The ClusterLock controller's watches (docs/clusterlock.md, By selector):
// an object created into a live selector ClusterLock, or labelled into
// one, brings a pass, which labels it, so that its delete is refused
// about one pass after it comes (the periodic pass, every
// clusterLockRecheck, stays the backstop).
//
// What is watched is what the live selector ClusterLocks need, and no
// more (issue 38: lockguard's memory grows with every cached object,
// docs/limits.md): each pass (track) watches, metadata only, the kinds
// they name, and forgets the informer of each kind none names any more,
// so that the cache holds no object of it; the cache keeps, of those
// objects' labels, only the keys the selectors read
// (readmodel.ClusterLabelKeys), so that a cached object says whether a
// live selector matches it, and a label change that brings it into one
// is seen. Namespaces are cached whatever the ClusterLocks (the namespace
// guard's informer): their watch is never forgotten.

// clusterWatches are the ClusterLock controller's watches of the kinds
// live selector ClusterLocks name (kindWatches, as the reconciler's
// target watches).
type clusterWatches struct {
	*kindWatches[reconcile.Request]
	mapper meta.RESTMapper
	// keys are the label keys the cache keeps of cluster-scoped objects;
	// nil keeps none (then only creates bring a pass).
	keys *readmodel.ClusterLabelKeys
	// live are the live selectors, as of the last pass; the watches'
	// handlers read them.
	live atomic.Pointer[liveSelectors]
	// started are the kinds whose informers track started: forgotten once
	// no live selector names them, watched or not. Only track (the pass,
	// one at a time) reads and writes it.
	started map[schema.GroupResource]readmodel.ServedKind
}

// newClusterWatches returns the watches of the ClusterLock controller c,
// over the metadata informers of cache.
func newClusterWatches(cache cache.Cache, c controller.TypedController[reconcile.Request], mapper meta.RESTMapper, keys *readmodel.ClusterLabelKeys) *clusterWatches {
	w := &clusterWatches{mapper: mapper, keys: keys, started: map[schema.GroupResource]readmodel.ServedKind{}}
	w.kindWatches = newKindWatches(cache, c, func(k readmodel.ServedKind) (handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request], []predicate.TypedPredicate[*metav1.PartialObjectMetadata]) {
		return clusterObjectEvents{gk: k.GVK.GroupKind(), live: w.selectors}, nil
	})
	return w
}

// selectors returns the live selectors as of the last pass.
func (w *clusterWatches) selectors() liveSelectors {
	if p := w.live.Load(); p != nil {
		return *p
	}
	return nil
}

// sharedInformer reports whether the informer of gr is read by more than
// these watches, and so is never removed: the Namespace informer is the
// namespace guard's.
func sharedInformer(gr schema.GroupResource) bool {
	return gr == schema.GroupResource{Resource: "namespaces"}
}

// track makes the watches what the ClusterLocks locks (those of the cache,
// at now) need, before the pass lists what their selectors match: it sets
// the label keys the cache keeps and the live selectors the handlers
// read, watches each kind they name that is served for cluster-scoped
// objects (once its informer has synced: the periodic pass covers it
// until then), and forgets every other kind it watches. It reports whether
// a kind named has not synced yet (the pass comes back in unsyncedRetry).
// An object transformed or handled before this pass's keys and selectors
// were set existed before the pass lists: the pass covers it.
func (w *clusterWatches) track(ctx context.Context, locks []lockv1alpha1.ClusterLock, now time.Time) (unsynced bool, err error) {
	live, keys := liveSelectorsOf(locks, now)
	if w.keys != nil {
		w.keys.Set(keys)
	}
	w.live.Store(&live)
	want := map[schema.GroupResource]readmodel.ServedKind{}
	var errs []error
	for gk := range live {
		mapping, err := w.mapper.RESTMapping(gk)
		switch {
		case meta.IsNoMatchError(err):
			continue // not served: the ClusterLock's status says so
		case err != nil:
			errs = append(errs, err)
			continue
		case mapping.Scope.Name() == meta.RESTScopeNameNamespace:
			continue
		}
		k := readmodel.ServedKind{GVK: mapping.GroupVersionKind, Resource: mapping.Resource.GroupResource()}
		want[k.Resource] = k
	}
	for _, k := range want {
		w.started[k.Resource] = k
		synced, err := w.synced(ctx, k)
		switch {
		case err != nil:
			errs = append(errs, err)
		case !synced:
			unsynced = true
		default:
			errs = append(errs, w.ensure(ctx, k))
		}
	}
	for gr, k := range w.started {
		if _, ok := want[gr]; ok || sharedInformer(gr) {
			continue
		}
		if err := w.forget(ctx, k); err != nil {
			errs = append(errs, err)
			continue
		}
		delete(w.started, gr)
	}
	return unsynced, errors.Join(errs...)
}

// track is clusterWatches.track for a pass of c: with the guard off no
// label is written, and nothing is watched. A kind that cannot be watched
// is logged, and waits for the periodic pass.
func (c *clusterLocks) track(ctx context.Context, locks []lockv1alpha1.ClusterLock, now time.Time) (unsynced bool) {
	if c.watches == nil {
		return false
	}
	if !c.guard {
		locks = nil
	}
	unsynced, err := c.watches.track(ctx, locks, now)
	if err != nil {
		log.FromContext(ctx).Error(err, "Cannot watch a kind a selector ClusterLock names; its objects are labelled by the periodic pass", "every", clusterLockRecheck.String())
	}
	return unsynced
}

// liveSelectors are the selectors of the live selector ClusterLocks, by
// each kind they name.
type liveSelectors map[schema.GroupKind][]*lockv1alpha1.ClusterLockSelector

// liveSelectorsOf returns the selectors of the live selector ClusterLocks
// of locks at now (ClusterLock.Live: neither deleted, invalid nor
// expired; Audit ones too, whose objects the pass labels as well), and
// the label keys they read.
func liveSelectorsOf(locks []lockv1alpha1.ClusterLock, now time.Time) (liveSelectors, []string) {
	live := liveSelectors{}
	var keys []string
	for i := range locks {
		cl := &locks[i]
		if !cl.HasSelector() || !cl.Live(now) {
			continue
		}
		s := cl.Spec.Selector
		for _, gk := range s.GroupKinds() {
			live[gk] = append(live[gk], s)
		}
		keys = slices.AppendSeq(keys, maps.Keys(s.MatchLabels))
		for _, r := range s.MatchExpressions {
			keys = append(keys, r.Key)
		}
	}
	return live, keys
}

// matches reports whether a live selector matches an object of gk with
// labels l.
func (s liveSelectors) matches(gk schema.GroupKind, l map[string]string) bool {
	return slices.ContainsFunc(s[gk], func(sel *lockv1alpha1.ClusterLockSelector) bool { return sel.Matches(gk, l) })
}

// clusterObjectEvents is the handler of the ClusterLock controller's
// watch of kind gk: an object created that a live selector matches, or
// whose labels change whether one does, brings a pass. Deletes bring
// none (nothing is left to label), nor do updates that leave the
// selectors' labels as they were (the cache keeps no other label).
type clusterObjectEvents struct {
	gk   schema.GroupKind
	live func() liveSelectors
}

var _ handler.TypedEventHandler[*metav1.PartialObjectMetadata, reconcile.Request] = clusterObjectEvents{}

// Create brings a pass when a live selector matches the object.
func (h clusterObjectEvents) Create(_ context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if h.live().matches(h.gk, e.Object.Labels) {
		q.Add(clusterLockKey)
	}
}

// Update brings a pass when whether a live selector matches the object
// changed: labelled into one (to be labelled) or out (to be swept).
func (h clusterObjectEvents) Update(_ context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	live := h.live()
	if live.matches(h.gk, e.ObjectNew.Labels) != live.matches(h.gk, e.ObjectOld.Labels) {
		q.Add(clusterLockKey)
	}
}

// Delete brings nothing.
func (clusterObjectEvents) Delete(context.Context, event.TypedDeleteEvent[*metav1.PartialObjectMetadata], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// Generic brings nothing.
func (clusterObjectEvents) Generic(context.Context, event.TypedGenericEvent[*metav1.PartialObjectMetadata], workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}
