package controller

import (
	"context"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"
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

// oneKind is a cache whose WaitForCacheSync waits for obj's informer only.
type oneKind struct {
	cache.Cache
	obj client.Object
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
