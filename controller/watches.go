package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// targetWatches adds, once per served resource, a metadata-only watch on a
// target kind to the reconciler. readmodel.Kinds are added while lockguard runs: when
// a Lock names one, and when discovery finds one in the group.
//
// A watch is keyed by the resource that serves the kind, and the target
// keys it produces carry the Kind as discovery serves it, so that one
// object is only ever one target: two spellings of a kind can never each
// have a watch, and so never fight over the same annotation.
type targetWatches struct {
	cache      cache.Cache
	controller controller.TypedController[request]
	// locks finds the selector Locks an object event concerns
	// (objectEvents).
	locks *readmodel.LockIndex

	mu      sync.Mutex
	watched map[schema.GroupResource]readmodel.ServedKind
}

// synced starts the metadata informer of kind k, if the cache does not
// have it yet, and reports whether it has synced, without waiting.
func (w *targetWatches) synced(ctx context.Context, k readmodel.ServedKind) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(k.GVK)
	inf, err := w.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return false, fmt.Errorf("getting the metadata informer of %s: %w", k.Resource, err)
	}
	return inf.HasSynced(), nil
}

// ensure watches the metadata of kind k, if it does not already.
func (w *targetWatches) ensure(k readmodel.ServedKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.watched[k.Resource]; ok {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(k.GVK)
	events := objectEvents{gk: k.GVK.GroupKind(), locks: w.locks}
	// Targets are only interesting when created, deleted, or when their
	// annotations or labels (which selector Locks match) change; their
	// spec and status are none of our business.
	changed := predicate.Or[*metav1.PartialObjectMetadata](
		predicate.TypedAnnotationChangedPredicate[*metav1.PartialObjectMetadata]{},
		predicate.TypedLabelChangedPredicate[*metav1.PartialObjectMetadata]{})
	if err := w.controller.Watch(kindSource[*metav1.PartialObjectMetadata](w.cache, obj, events, changed)); err != nil {
		return fmt.Errorf("watching %s: %w", k.Resource, err)
	}
	w.watched[k.Resource] = k
	return nil
}

// eachIn calls fn with every object of namespace ns, of every watched kind
// (of kinds only, when not empty), in the metadata caches, read-only (the
// objects are the cache's). It skips a kind whose cache has not synced: a
// list would wait for it, and one whose CRD was deleted never syncs (the
// event handlers that call this would then hold the controller's start
// until shutdown); the kind's objects bring their selector Locks back when
// it syncs (objectEvents). It stops at the first kind that cannot be
// listed and returns its error.
func (w *targetWatches) eachIn(ctx context.Context, ns string, kinds []string, fn func(schema.GroupKind, *metav1.PartialObjectMetadata)) error {
	w.mu.Lock()
	watched := make([]readmodel.ServedKind, 0, len(w.watched))
	for _, k := range w.watched {
		if len(kinds) == 0 || slices.Contains(kinds, k.GVK.Kind) {
			watched = append(watched, k)
		}
	}
	w.mu.Unlock()
	for _, k := range watched {
		if ok, err := w.synced(ctx, k); err != nil {
			return err
		} else if !ok {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		if err := w.cache.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
			return fmt.Errorf("listing the %s of namespace %s: %w", k.GVK.GroupKind(), ns, err)
		}
		gk := k.GVK.GroupKind()
		for i := range list.Items {
			fn(gk, &list.Items[i])
		}
	}
	return nil
}

// targetsIn returns the keys of the objects of namespace ns, in the
// caches, that selector s matches (LockSelector.Matches, on their cached
// labels): the objects a selector Lock of ns with s covers, or covered
// while it was live (s cannot change). An invalid selector matches none.
// It reads every cached object of s's kinds in ns (O(N) in-memory checks
// for N objects) and returns only those s matches.
func (w *targetWatches) targetsIn(ctx context.Context, ns string, s *lockv1alpha1.LockSelector) []request {
	if s.Validate() != nil {
		return nil
	}
	var reqs []request
	err := w.eachIn(ctx, ns, s.Kinds, func(gk schema.GroupKind, o *metav1.PartialObjectMetadata) {
		if s.Matches(gk.Kind, o.Labels) {
			reqs = append(reqs, request{Target: lockv1alpha1.TargetKey{Namespace: ns, Group: gk.Group, Kind: gk.Kind, Name: o.Name}})
		}
	})
	if err != nil {
		// The kind's own events reconcile its objects once it lists.
		ctrl.LoggerFrom(ctx).Error(err, "Cannot list the objects a selector Lock may cover", "namespace", ns)
	}
	return reqs
}

// protectedListTimeout bounds the cache reads of one targetWatches.protected.
const protectedListTimeout = 10 * time.Second

// protected returns the status.protected of the selector Lock lock: the
// objects of its namespace, of every watched kind (of its kinds, when it
// names some), that lock.Covers, as the metadata caches hold them.
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
func (w *targetWatches) protected(ctx context.Context, lock *lockv1alpha1.Lock) (*lockv1alpha1.ProtectedStatus, int, error) {
	ctx, cancel := context.WithTimeout(ctx, protectedListTimeout)
	defer cancel()
	var list protectedList
	unlabelled := 0
	err := w.eachIn(ctx, lock.Namespace, lock.Spec.Selector.Kinds, func(gk schema.GroupKind, o *metav1.PartialObjectMetadata) {
		if lock.Covers(lockv1alpha1.Object{Namespace: o.Namespace, Group: gk.Group, Kind: gk.Kind, Name: o.Name, Labels: o.Labels}) {
			list.add(lockv1alpha1.ProtectedResource{Kind: gk.Kind, Name: o.Name})
			if o.Labels[lockv1alpha1.ReadOnlyLabel] != "true" {
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
type targetDiscovery struct {
	kinds    *readmodel.Kinds
	watches  *targetWatches
	interval time.Duration
}

// NeedLeaderElection is true: the watches feed the reconciler, which only
// runs on the leader.
func (d *targetDiscovery) NeedLeaderElection() bool { return true }

// Start discovers kinds until ctx is done.
func (d *targetDiscovery) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, d.discover, d.interval)
	return nil
}

func (d *targetDiscovery) discover(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("kind-discovery")
	kinds, err := d.kinds.Recent(d.interval)
	if err != nil {
		log.Error(err, "Cannot discover the kinds of the group", "group", lockv1alpha1.Group)
		return
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
			log.Info("A discovered kind's cache has not synced yet; watching it later", "kind", k.GVK.GroupKind())
			continue
		}
		if err := d.watches.ensure(k); err != nil {
			log.Error(err, "Cannot watch a discovered kind", "kind", k.GVK.GroupKind())
		}
	}
}
