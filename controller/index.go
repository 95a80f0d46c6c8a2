package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// targetIndex is the name of the index NewLockIndex adds to the Lock
// informer: live Locks by lockv1alpha1.TargetKey.String of their target.
const targetIndex = "lockguard.target"

// indexByTarget is the targetIndex function: a live Lock is indexed by its
// target (Lock.LiveTarget), any other Lock not at all.
func indexByTarget(obj any) ([]string, error) {
	l, ok := obj.(*lockv1alpha1.Lock)
	if !ok {
		return nil, nil
	}
	if key, live := l.LiveTarget(); live {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// indexedInformer is what a controller-runtime informer is underneath:
// client-go's shared index informer.
type indexedInformer interface {
	HasSynced() bool
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
	AddIndexers(toolscache.Indexers) error
	GetIndexer() toolscache.Indexer
}

// errNotSynced is returned by a LockIndex whose informer has not synced.
var errNotSynced = errors.New("the Lock cache has not synced yet")

// LockIndex finds live Locks by target in the Lock informer of a cache:
// the cost of a lookup grows with the number of matching Locks, not with
// all Locks, and it makes no API call. The webhook and the reconciler look
// Locks up through it alike.
type LockIndex struct {
	informer indexedInformer
}

// NewLockIndex adds the index by target to the Lock informer of c and
// returns it. Call it before c starts. The index is on the informer
// itself, one value per Lock, where a controller-runtime field index keeps
// two (the namespace's and all namespaces'), each a set of its own.
func NewLockIndex(ctx context.Context, c cache.Informers) (*LockIndex, error) {
	inf, err := c.GetInformer(ctx, &lockv1alpha1.Lock{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("getting the Lock informer: %w", err)
	}
	ii, ok := inf.(indexedInformer)
	if !ok {
		return nil, fmt.Errorf("the Lock informer is a %T, not a client-go shared index informer", inf)
	}
	if err := ii.AddIndexers(toolscache.Indexers{targetIndex: indexByTarget}); err != nil {
		return nil, fmt.Errorf("indexing Locks by target: %w", err)
	}
	return &LockIndex{informer: ii}, nil
}

// HasSynced reports whether the Lock informer has synced, so that
// LiveLocks answers. It is a readiness check.
func (x *LockIndex) HasSynced() bool { return x.informer.HasSynced() }

// LiveLocks returns copies of the live Locks that target key, or
// errNotSynced before the informer has synced.
func (x *LockIndex) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, errNotSynced
	}
	objs, err := x.informer.GetIndexer().ByIndex(targetIndex, key.String())
	if err != nil {
		return nil, fmt.Errorf("looking up the Locks of %s %s/%s: %w", key.GroupKind(), key.Namespace, key.Name, err)
	}
	if len(objs) == 0 {
		return nil, nil
	}
	locks := make([]lockv1alpha1.Lock, 0, len(objs))
	for _, o := range objs {
		if l, ok := o.(*lockv1alpha1.Lock); ok {
			locks = append(locks, *l.DeepCopy())
		}
	}
	return locks, nil
}

// HasUID reports whether the informer's store holds the Lock
// namespace/name with that UID.
func (x *LockIndex) HasUID(namespace, name string, uid types.UID) bool {
	o, ok, err := x.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return false
	}
	l, isLock := o.(*lockv1alpha1.Lock)
	return isLock && l.UID == uid
}

// OnDelivered calls fn with the UID of every Lock the informer delivers
// (added, updated or deleted), after its store reflects it.
func (x *LockIndex) OnDelivered(fn func(types.UID)) error {
	uidOf := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if l, ok := o.(*lockv1alpha1.Lock); ok {
			fn(l.UID)
		}
	}
	_, err := x.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    uidOf,
		UpdateFunc: func(_, o any) { uidOf(o) },
		DeleteFunc: uidOf,
	})
	return err
}

// each calls fn with every Lock in the informer, read-only.
func (x *LockIndex) each(fn func(*lockv1alpha1.Lock)) {
	for _, o := range x.informer.GetIndexer().List() {
		if l, ok := o.(*lockv1alpha1.Lock); ok {
			fn(l)
		}
	}
}
