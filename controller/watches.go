package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// targetWatches adds, once per served resource, a metadata-only watch on a
// target kind to the reconciler. Kinds are added while lockguard runs: when
// a Lock names one, and when discovery finds one in the group.
//
// A watch is keyed by the resource that serves the kind, and the target
// keys it produces carry the Kind as discovery serves it, so that one
// object is only ever one target: two spellings of a kind can never each
// have a watch, and so never fight over the same annotation.
type targetWatches struct {
	cache      cache.Cache
	controller controller.TypedController[request]

	mu      sync.Mutex
	watched map[schema.GroupResource]bool
}

// synced starts the metadata informer of kind k, if the cache does not
// have it yet, and reports whether it has synced, without waiting.
func (w *targetWatches) synced(ctx context.Context, k servedKind) (bool, error) {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(k.GVK)
	inf, err := w.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return false, fmt.Errorf("getting the metadata informer of %s: %w", k.Resource, err)
	}
	return inf.HasSynced(), nil
}

// ensure watches the metadata of kind k, if it does not already.
func (w *targetWatches) ensure(k servedKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[k.Resource] {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(k.GVK)
	gk := k.GVK.GroupKind()
	toKey := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o *metav1.PartialObjectMetadata) []request {
		return []request{{Target: lockv1alpha1.TargetKey{Namespace: o.Namespace, Group: gk.Group, Kind: gk.Kind, Name: o.Name}}}
	})
	// Targets are only interesting when created, deleted, or when their
	// annotations change; their spec and status are none of our business.
	annotationChanged := predicate.TypedAnnotationChangedPredicate[*metav1.PartialObjectMetadata]{}
	if err := w.controller.Watch(kindSource(w.cache, obj, toKey, annotationChanged)); err != nil {
		return fmt.Errorf("watching %s: %w", k.Resource, err)
	}
	w.watched[k.Resource] = true
	return nil
}

// kindDiscoverer watches every namespaced kind of the core.navique.com group,
// found through discovery at start and then every interval, so that the
// reconciler sees (and cleans) annotated objects whose Locks were
// deleted while lockguard was not running, whatever their kind; and adds
// each to the owner index, when there is one.
type kindDiscoverer struct {
	kinds    *kindTable
	watches  *targetWatches
	owners   *OwnerIndex // nil: no cascade guard
	interval time.Duration
}

// NeedLeaderElection is true without an owner index: the watches feed the
// reconciler, which only runs on the leader. With one, discovery runs on
// every replica, so that every replica's webhook can walk cascades; a
// watch added to the reconciler on a replica that does not lead waits
// until the reconciler starts there.
func (d *kindDiscoverer) NeedLeaderElection() bool { return d.owners == nil }

// Start discovers kinds until ctx is done.
func (d *kindDiscoverer) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, d.discover, d.interval)
	return nil
}

func (d *kindDiscoverer) discover(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("kind-discovery")
	kinds, err := d.kinds.refresh()
	if err != nil {
		log.Error(err, "Cannot discover the kinds of the group", "group", lockv1alpha1.Group)
		return
	}
	complete := true
	for _, k := range kinds {
		if !watched(k) {
			continue
		}
		if d.owners != nil {
			if err := d.owners.ensure(ctx, k); err != nil {
				complete = false
				log.Error(err, "Cannot index a discovered kind by owner", "kind", k.GVK.GroupKind())
			}
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
	if d.owners != nil && complete {
		d.owners.markDiscovered()
	}
}

// watched reports whether discovery watches kind k: namespaced, watchable,
// and one a Lock may target.
func watched(k servedKind) bool {
	return k.Namespaced && k.Watchable && lockv1alpha1.Protectable(k.GVK.GroupKind()) == nil
}

// indexOwners adds to the owner index every kind discovery finds whose
// list answers now, and does nothing else: the reconciler's watches and
// the mark that discovery ran are discover's. Setup calls it before the
// manager starts, so that the owner index's informers start with the
// cache, beside the Lock informer, instead of once the Lock informer has
// synced (the manager starts discovery after its caches): at start the
// lists of Locks and of targets then run together, and /readyz, which
// waits for both, answers sooner.
//
// An informer added before the start is one the manager waits for before
// it starts anything else (its peers, discovery, the reconciler), with no
// time limit. So a kind is added here only if a one-item metadata list of
// it answers (within probeTimeout): a kind whose list fails (a conversion
// webhook down, an aggregated API away) is left to discover, which adds it
// once the manager runs, without blocking anything on it.
func (d *kindDiscoverer) indexOwners(ctx context.Context, reader client.Reader) error {
	kinds, err := d.kinds.refresh()
	if err != nil {
		return err
	}
	var failed []error
	for _, k := range kinds {
		if !watched(k) {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
		probeCtx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := reader.List(probeCtx, list, client.Limit(1))
		cancel()
		if err == nil {
			err = d.owners.ensure(ctx, k)
		}
		if err != nil {
			failed = append(failed, fmt.Errorf("%s: %w", k.Resource, err))
		}
	}
	return errors.Join(failed...)
}

// probeTimeout bounds indexOwners' list of one kind.
const probeTimeout = 5 * time.Second
