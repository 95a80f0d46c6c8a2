package controller

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TargetIndex is the name of the field index on Locks by target. Its values
// are TargetIndexValue of the target's group, kind and name; the manager's
// cache scopes them by namespace.
const TargetIndex = "lockguard.spec.targetRef"

// TargetIndexValue is the TargetIndex value of an object: "group/Kind/name".
// The API version is not part of it, so matching is version-agnostic.
func TargetIndexValue(gk schema.GroupKind, name string) string {
	return gk.Group + "/" + gk.Kind + "/" + name
}

// ValidTarget returns the group and kind of the Lock's target, or an error
// that says why the Lock can never protect it: its apiVersion does not
// parse, it is outside the core.navique.com group, or it is itself a Lock.
func ValidTarget(l *lockv1alpha1.Lock) (schema.GroupKind, error) {
	gk, err := l.Spec.TargetRef.GroupKind()
	if err != nil {
		return gk, fmt.Errorf("targetRef.apiVersion %q is not a valid API version: %w", l.Spec.TargetRef.APIVersion, err)
	}
	if gk.Group != lockv1alpha1.Group {
		return gk, fmt.Errorf("only %s resources can be locked, and targetRef.apiVersion %q is in group %q", lockv1alpha1.Group, l.Spec.TargetRef.APIVersion, gk.Group)
	}
	if gk.Kind == "Lock" {
		return gk, errors.New("a Lock cannot protect another Lock: deleting a Lock is never blocked")
	}
	return gk, nil
}

// isLive reports whether a Lock counts: it is not being deleted and its
// target is valid.
func isLive(l *lockv1alpha1.Lock) bool {
	if l.DeletionTimestamp != nil {
		return false
	}
	_, err := ValidTarget(l)
	return err == nil
}

// indexLockTarget is the TargetIndex function: live Locks are indexed by
// their target, others not at all.
func indexLockTarget(obj client.Object) []string {
	l, ok := obj.(*lockv1alpha1.Lock)
	if !ok || !isLive(l) {
		return nil
	}
	gk, _ := ValidTarget(l)
	return []string{TargetIndexValue(gk, l.Spec.TargetRef.Name)}
}

// informerIndex is the name of the index IndexLocks adds to the Lock
// informer: live Locks by namespace and TargetIndexValue.
const informerIndex = "lockguard.target"

// informerIndexKey is the informerIndex value of a target.
func informerIndexKey(gk schema.GroupKind, obj types.NamespacedName) string {
	return obj.Namespace + "/" + TargetIndexValue(gk, obj.Name)
}

// indexInformer is the informerIndex function.
func indexInformer(obj any) ([]string, error) {
	l, ok := obj.(*lockv1alpha1.Lock)
	if !ok || !isLive(l) {
		return nil, nil
	}
	gk, _ := ValidTarget(l)
	return []string{informerIndexKey(gk, types.NamespacedName{Namespace: l.Namespace, Name: l.Spec.TargetRef.Name})}, nil
}

// indexedInformer is what a controller-runtime informer is underneath:
// client-go's shared index informer.
type indexedInformer interface {
	AddIndexers(toolscache.Indexers) error
	GetIndexer() toolscache.Indexer
}

// IndexLocks indexes Locks by target. It must be called before the cache
// starts. On controller-runtime's informer cache (the manager's field
// indexer), it adds informerIndex to the Lock informer itself: one value
// per Lock, where controller-runtime's field indexes keep two (the
// namespace's and all namespaces'), each a set of its own, which doubled
// lockguard's memory per Lock. Elsewhere it registers TargetIndex as a
// field index.
func IndexLocks(ctx context.Context, indexer client.FieldIndexer) error {
	if informers, ok := indexer.(cache.Informers); ok {
		inf, err := informers.GetInformer(ctx, &lockv1alpha1.Lock{}, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("getting the Lock informer: %w", err)
		}
		if ii, ok := inf.(indexedInformer); ok {
			if err := ii.AddIndexers(toolscache.Indexers{informerIndex: indexInformer}); err != nil {
				return fmt.Errorf("indexing Locks by target: %w", err)
			}
			return nil
		}
	}
	if err := indexer.IndexField(ctx, &lockv1alpha1.Lock{}, TargetIndex, indexLockTarget); err != nil {
		return fmt.Errorf("indexing Locks by target: %w", err)
	}
	return nil
}

// errNotSynced is returned by a Finder whose Lock cache has not synced.
var errNotSynced = errors.New("the Lock cache has not synced yet")

// Finder finds live Locks through their index by target in an informer
// cache: the cost of a lookup grows with the number of matching Locks, not
// with all Locks, and it makes no API call.
type Finder struct {
	reader client.Reader
	synced func() bool
	// index is the Lock informer's indexer, when IndexLocks added
	// informerIndex to it; otherwise reader's TargetIndex is used.
	index toolscache.Indexer
}

// NewFinder returns a Finder that reads from c, in which IndexLocks has
// indexed Locks. Until c's Lock informer has synced, FindLocks returns an
// error instead of an answer that might be incomplete.
func NewFinder(ctx context.Context, c cache.Cache) (*Finder, error) {
	inf, err := c.GetInformer(ctx, &lockv1alpha1.Lock{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("getting the Lock informer: %w", err)
	}
	f := &Finder{reader: c, synced: inf.HasSynced}
	if ii, ok := inf.(indexedInformer); ok {
		if _, indexed := ii.GetIndexer().GetIndexers()[informerIndex]; indexed {
			f.index = ii.GetIndexer()
		}
	}
	return f, nil
}

// HasSynced reports whether the Lock cache has synced, so that FindLocks
// answers. It is a readiness check.
func (f *Finder) HasSynced() bool { return f.synced() }

// FindLocks returns the live Locks in obj's namespace that target the
// group, kind and name of obj.
func (f *Finder) FindLocks(ctx context.Context, gk schema.GroupKind, obj types.NamespacedName) ([]lockv1alpha1.Lock, error) {
	if !f.synced() {
		return nil, errNotSynced
	}
	return f.find(ctx, gk, obj)
}

// find is FindLocks without the check that the cache has synced.
func (f *Finder) find(ctx context.Context, gk schema.GroupKind, obj types.NamespacedName) ([]lockv1alpha1.Lock, error) {
	if f.index != nil {
		objs, err := f.index.ByIndex(informerIndex, informerIndexKey(gk, obj))
		if err != nil {
			return nil, fmt.Errorf("looking up Locks targeting %s %s: %w", gk, obj, err)
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
	var locks lockv1alpha1.LockList
	if err := f.reader.List(ctx, &locks, client.InNamespace(obj.Namespace),
		client.MatchingFields{TargetIndex: TargetIndexValue(gk, obj.Name)}); err != nil {
		return nil, fmt.Errorf("listing Locks targeting %s %s: %w", gk, obj, err)
	}
	return locks.Items, nil
}
