package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
	"github.com/navique/lockguard/internal/readmodel"
)

// targetWatches adds, once per served resource, a metadata-only watch on a
// target kind to the reconciler (kindWatches). readmodel.Kinds are added
// while lockguard runs: when a Lock names one, and when discovery finds
// one in the group.
//
// A watch is keyed by the resource that serves the kind, and the target
// keys it produces carry the Kind as discovery serves it, so that one
// object is only ever one target: two spellings of a kind can never each
// have a watch, and so never fight over the same annotation.
//
// The reconciler's event handlers read the watched kinds' objects
// (eachIn: a selector Lock's event enqueues the objects it matches), and
// a handler must never wait: the controller starts its workers only once
// every source's handler has taken its initial list, so a handler that
// waits holds the reconciler's start (until shutdown, when what it waits
// for never comes). eachIn therefore reads the informers' stores directly,
// never the cache (whose reads wait for a kind to sync, and one whose CRD
// was deleted never does), and takes only kindWatches.mu. Target kinds are
// never forgotten: the owner index shares their informers.
type targetWatches struct {
	*kindWatches[item]
}

// newTargetWatches returns the target watches of controller c, over the
// metadata informers of cache; locks finds the selector Locks an object
// event concerns (objectEvents).
func newTargetWatches(cache cache.Cache, c controller.TypedController[item], locks *readmodel.LockIndex) *targetWatches {
	w := &targetWatches{}
	w.kindWatches = newKindWatches(cache, c, func(k readmodel.ServedKind) (handler.TypedEventHandler[*metav1.PartialObjectMetadata, item], []predicate.TypedPredicate[*metav1.PartialObjectMetadata]) {
		// Targets are only interesting when created, deleted, or when their
		// annotations or labels (which selector Locks match) change; their
		// spec and status are none of our business.
		return objectEvents{gk: k.GVK.GroupKind(), locks: locks, seen: func() bool { return w.sees(k) }}, []predicate.TypedPredicate[*metav1.PartialObjectMetadata]{predicate.Or[*metav1.PartialObjectMetadata](
			predicate.TypedAnnotationChangedPredicate[*metav1.PartialObjectMetadata]{},
			predicate.TypedLabelChangedPredicate[*metav1.PartialObjectMetadata]{})}
	})
	return w
}

// sees reports whether eachIn reads the objects of kind k: it is watched
// (recorded before its watch's handler is added: kindWatches.ensure) and
// its informer has synced. Both stay so until the kind is forgotten
// (target kinds never are).
func (w *targetWatches) sees(k readmodel.ServedKind) bool {
	w.mu.Lock()
	wk, ok := w.watched[k.Resource]
	w.mu.Unlock()
	return ok && wk.informer.HasSynced()
}

// eachIn calls fn with every object of namespace ns, of every watched kind
// (of kinds only, when not empty), in the metadata informers' stores,
// read-only (the objects are the stores'). It never waits, so that event
// handlers can call it (targetWatches): it reads the stores themselves,
// not the cache, and skips a kind whose informer has not synced (one whose
// CRD was deleted never does); the kind's objects bring their selector
// Locks back when it syncs (objectEvents).
//
// fn runs under the store's read lock (cachestore.EachIndexed): it must
// not read the stores.
func (w *targetWatches) eachIn(ns string, kinds []string, fn func(schema.GroupKind, metav1.Object)) error {
	for _, k := range w.watchedKinds() {
		if len(kinds) > 0 && !slices.Contains(kinds, k.GVK.Kind) {
			continue
		}
		if !k.informer.HasSynced() {
			continue
		}
		gk := k.GVK.GroupKind()
		if err := cachestore.EachIndexed(k.informer.GetIndexer(), toolscache.NamespaceIndex, ns, func(o metav1.Object) { fn(gk, o) }); err != nil {
			return fmt.Errorf("listing the %s of namespace %s: %w", gk, ns, err)
		}
	}
	return nil
}

// targetsIn returns the keys of the objects of namespace ns, in the
// caches, that selector s matches (LockSelector.Matches, on their cached
// labels): the objects a selector Lock of ns with s covers, or covered
// while it was live (s cannot change). An invalid selector matches none.
// It reads every cached object of s's kinds in ns (O(N) in-memory checks
// for N objects) and returns only those s matches. It never waits
// (eachIn).
func (w *targetWatches) targetsIn(ctx context.Context, ns string, s *lockv1alpha1.LockSelector) []request {
	if s.Validate() != nil {
		return nil
	}
	var reqs []request
	err := w.eachIn(ns, s.Kinds, func(gk schema.GroupKind, o metav1.Object) {
		if s.MatchesLabels(gk.Kind, readmodel.LabelsOf(o)) {
			reqs = append(reqs, request{Target: lockv1alpha1.TargetKey{Namespace: ns, Group: gk.Group, Kind: gk.Kind, Name: o.GetName()}})
		}
	})
	if err != nil {
		// The kind's own events reconcile its objects.
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the objects a selector Lock may cover", "namespace", ns)
	}
	return reqs
}

// protected returns the status.protected of the selector Lock lock: the
// objects of its namespace, of every watched kind (of its kinds, when it
// names some), that lock selects (Lock.Selects: a pass asks only of a live
// Lock, so this is what it covers), as the metadata informers hold them (of
// the kinds whose informers have synced: eachIn).
//
// It reads every cached object of those kinds in the namespace: a pass
// over a selector Lock costs O(N) in-memory checks for N objects there,
// and makes no API call. Object events bring the Lock back here at most
// once per protectedRecount (objectEvents), so a burst of creates in
// a namespace costs each of its M selector Locks one pass per
// protectedRecount, not one per object.
//
// It also returns how many of them do not carry ReadOnlyLabel=true (each
// object's own pass puts it on, when a ReadOnly Lock covers it), for the
// ReadOnly condition of a ReadOnly Lock.
func (w *targetWatches) protected(lock *lockv1alpha1.Lock) (*lockv1alpha1.ProtectedStatus, int, error) {
	var list protectedList
	unlabelled := 0
	err := w.eachIn(lock.Namespace, lock.Spec.Selector.Kinds, func(gk schema.GroupKind, o metav1.Object) {
		labels := readmodel.LabelsOf(o)
		if lock.Selects(lockv1alpha1.Object{Namespace: o.GetNamespace(), Group: gk.Group, Kind: gk.Kind, Name: o.GetName(), LabelReader: labels}) {
			list.add(lockv1alpha1.ProtectedResource{Kind: gk.Kind, Name: o.GetName()})
			if v, _ := labels.Label(lockv1alpha1.ReadOnlyLabel); v != "true" {
				unlabelled++
			}
		}
	})
	if err != nil {
		return nil, 0, fmt.Errorf("listing what Lock %s covers: %w", client.ObjectKeyFromObject(lock), err)
	}
	return list.status(), unlabelled, nil
}

// targetDiscovery watches every kind of the core.navique.com group that
// discovery serves (readmodel.ServedKind.Watched), at start and then every
// interval, so that the reconciler sees (and cleans) annotated objects
// whose Locks were deleted while lockguard was not running, whatever their
// kind, and kinds whose CRD is installed later. It reads the kinds that
// discovery served within the last interval (readmodel.Kinds.Recent):
// where the owner index's discovery runs too, the two read discovery about
// once per interval between them.
//
// While a kind it found has not synced it looks again every unsyncedRetry
// (reading the kinds discovery served within the interval, not discovery
// again): the informers start with the manager, so at start every kind is
// found unsynced, and a selector Lock's status counts a kind's objects
// only once its watch is added.
type targetDiscovery struct {
	kinds    *readmodel.Kinds
	watches  *targetWatches
	interval time.Duration

	// waiting are the kinds found unsynced whose wait has been logged.
	waiting map[schema.GroupResource]bool
}

// unsyncedRetry is how soon targetDiscovery looks again while a kind it
// found has not synced.
const unsyncedRetry = time.Second

// NeedLeaderElection is true: the watches feed the reconciler, which only
// runs on the leader.
func (d *targetDiscovery) NeedLeaderElection() bool { return true }

// Start discovers kinds until ctx is done: every interval, or every
// unsyncedRetry while a kind found has not synced.
func (d *targetDiscovery) Start(ctx context.Context) error {
	next := time.NewTimer(0)
	defer next.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-next.C:
		}
		after := d.interval
		if d.discover(ctx) {
			after = min(after, unsyncedRetry)
		}
		next.Reset(after)
	}
}

// discover watches every kind found that has synced, and reports whether
// one found has not (it is watched once it has).
func (d *targetDiscovery) discover(ctx context.Context) (unsynced bool) {
	log := ctrl.LoggerFrom(ctx).WithName("kind-discovery")
	kinds, err := d.kinds.Recent(d.interval)
	if err != nil {
		log.Error(err, "Cannot discover the kinds of the group", "group", lockv1alpha1.Group)
		return false
	}
	if d.waiting == nil {
		d.waiting = map[schema.GroupResource]bool{}
	}
	for _, k := range kinds {
		if !k.Watched() {
			continue
		}
		// The reconciler's watch of a kind is added once the kind's
		// informer has synced: a controller that has not started yet
		// waits for every watch it has before its workers start, so a
		// kind whose list never succeeds would keep the reconciler from
		// running at all. Until then, the next pass looks again.
		synced, err := d.watches.synced(ctx, k)
		switch {
		case err != nil:
			log.Error(err, "Cannot watch a discovered kind", "kind", k.GVK.GroupKind())
			continue
		case !synced:
			if !d.waiting[k.Resource] {
				d.waiting[k.Resource] = true
				log.Info("A discovered kind's cache has not synced yet; watching it once it has", "kind", k.GVK.GroupKind())
			}
			unsynced = true
			continue
		}
		delete(d.waiting, k.Resource)
		if err := d.watches.ensure(ctx, k); err != nil {
			log.Error(err, "Cannot watch a discovered kind", "kind", k.GVK.GroupKind())
		}
	}
	return unsynced
}
