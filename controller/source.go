package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

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
	return source.TypedKind[T, R](oneKind{Cache: c, obj: obj}, obj, h, preds...)
}

// oneKind is a cache whose WaitForCacheSync waits for obj's informer
// only, and whose informers hand their handlers the metadata objects they
// store (readmodel.Meta) as metav1.PartialObjectMetadata of obj's kind
// (partialEvents), as the source's handlers expect.
type oneKind struct {
	cache.Cache
	obj client.Object
}

// GetInformer returns the cache's informer for obj, whose handlers see
// metadata objects as metav1.PartialObjectMetadata (partialEvents).
func (c oneKind) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	if err != nil {
		return nil, err
	}
	if _, ok := obj.(*metav1.PartialObjectMetadata); !ok {
		return inf, nil
	}
	return partialInformer{Informer: inf, gvk: obj.GetObjectKind().GroupVersionKind()}, nil
}

// partialInformer is an informer whose handlers see each readmodel.Meta
// as a metav1.PartialObjectMetadata of kind gvk (readmodel.AsPartial).
type partialInformer struct {
	cache.Informer
	gvk schema.GroupVersionKind
}

// AddEventHandler adds h, seeing metav1.PartialObjectMetadata.
func (i partialInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandler(partialEvents{h: h, gvk: i.gvk})
}

// AddEventHandlerWithResyncPeriod adds h, seeing metav1.PartialObjectMetadata.
func (i partialInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithResyncPeriod(partialEvents{h: h, gvk: i.gvk}, resync)
}

// AddEventHandlerWithOptions adds h, seeing metav1.PartialObjectMetadata.
func (i partialInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.Informer.AddEventHandlerWithOptions(partialEvents{h: h, gvk: i.gvk}, o)
}

// partialEvents passes each event to h with its objects as
// metav1.PartialObjectMetadata of kind gvk: copies, which h may keep.
type partialEvents struct {
	h   toolscache.ResourceEventHandler
	gvk schema.GroupVersionKind
}

func (e partialEvents) OnAdd(obj any, initial bool) {
	e.h.OnAdd(readmodel.AsPartial(obj, e.gvk), initial)
}

func (e partialEvents) OnUpdate(old, obj any) {
	e.h.OnUpdate(readmodel.AsPartial(old, e.gvk), readmodel.AsPartial(obj, e.gvk))
}

func (e partialEvents) OnDelete(obj any) {
	e.h.OnDelete(readmodel.AsPartial(obj, e.gvk))
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
