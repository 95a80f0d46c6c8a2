package controller

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/navique/lockguard/internal/readmodel"
)

// kindWatches adds to a controller, once per served resource, a
// metadata-only watch of a kind found while lockguard runs, on the
// metadata informer of the manager's cache, and can forget one: the
// reconciler's target watches (targetWatches: the kinds Locks can name)
// and the ClusterLock controller's (clusterWatches: the kinds live
// selector ClusterLocks name) are both one.
//
// A watch is added once its kind's informer has synced (synced, then
// ensure): a controller that has not started yet waits for every watch it
// has before its workers start, and a source added to a started one
// waits for its informer without end when it never syncs (a kind whose
// list fails), past a forget.
//
// Event handlers may read the watched kinds' informers (watchedKinds)
// and must never wait: ensure serialises on adding, held across
// controller.Watch, which waits while the controller starts, that is
// while the handlers take their initial lists; mu is never held across a
// call that can wait.
type kindWatches[R comparable] struct {
	cache      cache.Cache
	controller controller.TypedController[R]
	// events returns the handler and the predicates of kind k's watch.
	events func(k readmodel.ServedKind) (handler.TypedEventHandler[*metav1.PartialObjectMetadata, R], []predicate.TypedPredicate[*metav1.PartialObjectMetadata])

	// adding is held by ensure and forget while they add or remove a
	// watch; no event handler takes it.
	adding sync.Mutex
	// mu guards watched, and is held only to read or write it.
	mu      sync.Mutex
	watched map[schema.GroupResource]watchedKind
}

// newKindWatches returns the watches of controller c over the metadata
// informers of cache, each with the handler and predicates events gives.
func newKindWatches[R comparable](cache cache.Cache, c controller.TypedController[R],
	events func(readmodel.ServedKind) (handler.TypedEventHandler[*metav1.PartialObjectMetadata, R], []predicate.TypedPredicate[*metav1.PartialObjectMetadata]),
) *kindWatches[R] {
	return &kindWatches[R]{cache: cache, controller: c, events: events, watched: map[schema.GroupResource]watchedKind{}}
}

// watchedKind is a watched kind and its metadata informer.
type watchedKind struct {
	readmodel.ServedKind
	informer storeInformer
}

// storeInformer is what an informer of lockguard's cache is underneath
// (a cachestore.Informer, a shared index informer): whether it has
// synced, and its store, indexed by namespace (every informer of a
// controller-runtime cache is).
type storeInformer interface {
	HasSynced() bool
	GetIndexer() toolscache.Indexer
}

// metadataObject is an empty object of kind k, metadata only.
func metadataObject(k readmodel.ServedKind) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(k.GVK)
	return obj
}

// informer returns the metadata informer of kind k, started if the cache
// does not have it yet, without waiting for it to sync.
func (w *kindWatches[R]) informer(ctx context.Context, k readmodel.ServedKind) (storeInformer, error) {
	inf, err := w.cache.GetInformer(ctx, metadataObject(k), cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("getting the metadata informer of %s: %w", k.Resource, err)
	}
	si, ok := inf.(storeInformer)
	if !ok {
		return nil, fmt.Errorf("the metadata informer of %s is a %T, not a shared index informer", k.Resource, inf)
	}
	return si, nil
}

// synced starts the metadata informer of kind k, if the cache does not
// have it yet, and reports whether it has synced, without waiting.
func (w *kindWatches[R]) synced(ctx context.Context, k readmodel.ServedKind) (bool, error) {
	inf, err := w.informer(ctx, k)
	if err != nil {
		return false, err
	}
	return inf.HasSynced(), nil
}

// ensure watches the metadata of kind k, if it does not already. Before the
// controller has started, it waits for the start (controller.Watch).
func (w *kindWatches[R]) ensure(ctx context.Context, k readmodel.ServedKind) error {
	w.adding.Lock()
	defer w.adding.Unlock()
	if w.has(k.Resource) {
		return nil
	}
	inf, err := w.informer(ctx, k)
	if err != nil {
		return err
	}
	// Recorded before the handler is added, so that the events of what
	// the handler's first adds would miss (a Lock created meanwhile) read
	// the kind's store (targetWatches.sees).
	w.mu.Lock()
	w.watched[k.Resource] = watchedKind{ServedKind: k, informer: inf}
	w.mu.Unlock()
	h, preds := w.events(k)
	if err := w.controller.Watch(kindSource[*metav1.PartialObjectMetadata](w.cache, metadataObject(k), h, preds...)); err != nil {
		w.mu.Lock()
		delete(w.watched, k.Resource)
		w.mu.Unlock()
		return fmt.Errorf("watching %s: %w", k.Resource, err)
	}
	return nil
}

// has reports whether the resource gr is watched.
func (w *kindWatches[R]) has(gr schema.GroupResource) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.watched[gr]
	return ok
}

// watchedKinds returns the kinds watched, with their informers.
func (w *kindWatches[R]) watchedKinds() []watchedKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]watchedKind, 0, len(w.watched))
	for _, k := range w.watched {
		out = append(out, k)
	}
	return out
}

// forget stops watching kind k, if it does: it removes k's informer from
// the cache, watched or only started (synced), stopping it, its store and
// the watch's handler with it, so that the cache holds none of its
// objects. Only for a kind whose informer is this watch's alone: another
// reader of the cache would lose it too. A later ensure watches the kind
// afresh.
func (w *kindWatches[R]) forget(ctx context.Context, k readmodel.ServedKind) error {
	w.adding.Lock()
	defer w.adding.Unlock()
	if err := w.cache.RemoveInformer(ctx, metadataObject(k)); err != nil {
		return fmt.Errorf("removing the metadata informer of %s: %w", k.Resource, err)
	}
	w.mu.Lock()
	delete(w.watched, k.Resource)
	w.mu.Unlock()
	return nil
}
