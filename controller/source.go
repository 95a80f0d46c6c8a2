package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// kindSource is source.TypedKind over c, except that its sync waits for
// obj's informer alone. source.Kind also waits for every other informer
// of the cache (Cache.WaitForCacheSync), and the reconciler's controller
// starts its workers only once its sources have synced, failing after
// its sync timeout: a kind of the group whose list never succeeds (a
// conversion webhook down), whose owner-index informer runs in the same
// cache on every replica, would otherwise keep the reconciler from ever
// starting, and make the leader exit after two minutes.
func kindSource[T client.Object, R comparable](c cache.Cache, obj T, h handler.TypedEventHandler[T, R], preds ...predicate.TypedPredicate[T]) source.TypedSource[R] {
	return source.TypedKind[T, R](oneKind{Cache: c, obj: obj, drops: dropsOf(h)}, obj, h, preds...)
}

// addDropper is a handler that can tell, from an object as its informer
// stores it, that it would drop the object's add (objectEvents.dropsAdd).
type addDropper interface{ dropsAdd(obj any) bool }

// dropsOf returns h's dropsAdd, nil if it has none.
func dropsOf(h any) func(any) bool {
	if d, ok := h.(addDropper); ok {
		return d.dropsAdd
	}
	return nil
}

// oneKind is a cache whose WaitForCacheSync waits for obj's informer
// only, and whose informers hand their handlers the objects they store in
// lockguard's form as the types the source's handlers expect
// (convertedEvents): the metadata objects (readmodel.Meta) as
// metav1.PartialObjectMetadata of obj's kind, the Locks
// (readmodel.CachedLock) as lockv1alpha1.Lock; without the adds that
// drops reports the source's handler would drop (nil: none).
type oneKind struct {
	cache.Cache
	obj   client.Object
	drops func(any) bool
}

// GetInformer returns the cache's informer for obj, whose handlers see
// metadata objects as metav1.PartialObjectMetadata and Locks as
// lockv1alpha1.Lock (convertedEvents).
func (c oneKind) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	switch obj.(type) {
	case *metav1.PartialObjectMetadata:
		gvk := obj.GetObjectKind().GroupVersionKind()
		return convertingInformer{Informer: inf, convert: func(o any) any { return readmodel.AsPartial(o, gvk) }, drops: c.drops}, nil
	case *lockv1alpha1.Lock:
		return convertingInformer{Informer: inf, convert: readmodel.AsLock, drops: c.drops}, nil
	}
	return inf, nil
}

// convertingInformer is an informer whose handlers see each object it
// stores as convert returns it: a readmodel.Meta as a
// metav1.PartialObjectMetadata (readmodel.AsPartial), a
// readmodel.CachedLock as a lockv1alpha1.Lock (readmodel.AsLock); but
// an add that drops reports the handlers would drop (nil: none) reaches
// none of them.
type convertingInformer struct {
	cache.Informer
	convert func(any) any
	drops   func(any) bool
}

// AddEventHandler adds h, seeing converted objects (events).
func (i convertingInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(i.events(h))
}

// AddEventHandlerWithResyncPeriod adds h, seeing converted objects (events).
func (i convertingInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(i.events(h), resync)
}

// AddEventHandlerWithOptions adds h, seeing converted objects (events).
func (i convertingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(i.events(h), o)
}

// events returns h seeing converted objects, without the adds i.drops
// reports it would drop.
//
// Every informer of lockguard's cache is a cachestore.Informer
// (readmodel.NewInformerFunc), whose handlers are observers of its store:
// told of each change in the informer's goroutine, with no notification
// buffer, and, when added once objects are stored, told of them first as
// adds of the initial list before the add returns. client-go's informer
// hands a handler added to a synced informer every stored object through
// a buffer of the handler's own that grows to the backlog and never
// shrinks (about 21 bytes an object; 20 MB at a million objects in the
// scale runs: docs/history/scale-runs.md).
func (i convertingInformer) events(h toolscache.ResourceEventHandler) convertedEvents {
	return convertedEvents{h: h, convert: i.convert, drops: i.drops}
}

// convertedEvents passes each event to h with its objects as convert
// returns them: copies, which h may keep; except the adds drops (when
// set) reports h would drop, which it passes on to nothing, unconverted.
type convertedEvents struct {
	h       toolscache.ResourceEventHandler
	convert func(any) any
	drops   func(any) bool
}

func (e convertedEvents) OnAdd(obj any, initial bool) {
	if e.drops != nil && e.drops(obj) {
		return
	}
	e.h.OnAdd(e.convert(obj), initial)
}

func (e convertedEvents) OnUpdate(old, obj any) {
	e.h.OnUpdate(e.convert(old), e.convert(obj))
}

func (e convertedEvents) OnDelete(obj any) {
	e.h.OnDelete(e.convert(obj))
}

// WaitForCacheSync waits until obj's informer has synced, and reports
// whether it did before ctx ended.
func (c oneKind) WaitForCacheSync(ctx context.Context) bool {
	inf, err := c.Cache.GetInformer(ctx, c.obj, cache.BlockUntilSynced(false))
	if err != nil {
		return false
	}
	return toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
}
