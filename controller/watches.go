package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

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
	if err := w.controller.Watch(source.TypedKind(w.cache, obj, toKey, annotationChanged)); err != nil {
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
		if err := d.watches.ensure(k); err != nil {
			log.Error(err, "Cannot watch a discovered kind", "kind", k.GVK.GroupKind())
		}
		if d.owners == nil {
			continue
		}
		if err := d.owners.ensure(ctx, k); err != nil {
			complete = false
			log.Error(err, "Cannot index a discovered kind by owner", "kind", k.GVK.GroupKind())
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

// indexOwners adds every kind discovery finds to the owner index, and
// does nothing else: the reconciler's watches and the mark that discovery
// ran are discover's. Setup calls it before the manager starts, so that
// the owner index's informers start with the cache, beside the Lock
// informer, instead of once the Lock informer has synced (the manager
// starts discovery after its caches): at start the lists of Locks and of
// targets then run together, and /readyz, which waits for both, answers
// sooner. What fails here is left to discover's first pass.
func (d *kindDiscoverer) indexOwners(ctx context.Context) error {
	kinds, err := d.kinds.refresh()
	if err != nil {
		return err
	}
	for _, k := range kinds {
		if watched(k) {
			if err := d.owners.ensure(ctx, k); err != nil {
				return err
			}
		}
	}
	return nil
}
