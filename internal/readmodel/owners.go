package readmodel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// ownerIndex is the name of the index OwnerIndex adds to the metadata
// informer of each kind of the group: objects by the UIDs their
// ownerReferences name.
const ownerIndex = "lockguard.owner"

// indexByOwner is the ownerIndex function.
func indexByOwner(obj any) ([]string, error) {
	var uids []string
	switch o := obj.(type) {
	case *Meta:
		uids = o.ownerUIDs()
	case metav1.Object:
		for _, ref := range o.GetOwnerReferences() {
			uids = append(uids, string(ref.UID))
		}
	}
	if len(uids) == 0 {
		return nil, nil
	}
	// An object may carry thousands of references (a claim of whoever
	// wrote it): sort, not compare each with all, to drop repeats.
	slices.Sort(uids)
	return slices.Compact(uids), nil
}

// errOwnersNotDiscovered is returned by an OwnerIndex before kind
// discovery has run once.
var errOwnersNotDiscovered = errors.New("the kinds of the group have not been discovered yet")

// OwnerIndex is the ownership between the objects of the namespaced kinds
// of the core.navique.com group (Locks excepted), from metadata-only
// informers of those kinds: the same informers as the reconciler's target
// watches (one per kind in the manager's cache), started on every replica
// so that every replica's webhook can walk a cascade (the cascade guard,
// docs/contract.md rule 6). Each informer is indexed by owner UID; the objects
// keep what CacheTransform keeps of them (UID, owner references, the
// garbage collector's finalizers, deletionTimestamp).
//
// Kinds are added by kind discovery (Discovery, on every replica). It
// makes no API call of its own.
type OwnerIndex struct {
	cache  cache.Informers
	labels *LabelKeys // the cache's transform's; nil: it keeps every label

	mu         sync.RWMutex
	kinds      map[schema.GroupKind]indexedInformer
	order      []schema.GroupKind // kinds in the order they were added
	discovered bool
}

// NewOwnerIndex returns an OwnerIndex over the metadata informers of c
// (the manager's cache), whose transform keeps the labels of labels (nil:
// every label). It watches nothing until kind discovery adds kinds
// (NewDiscovery).
func NewOwnerIndex(c cache.Informers, labels *LabelKeys) *OwnerIndex {
	return &OwnerIndex{cache: c, labels: labels, kinds: map[schema.GroupKind]indexedInformer{}}
}

// LabelGeneration is the generation of the label keys kept of the
// objects of namespace ns, and whether they carry them all
// (LabelKeys.Generation): the cascade guard asks before its walk and
// after it has read the Lock index (webhook.LabelKeeper).
func (x *OwnerIndex) LabelGeneration(ns string) (int, bool) { return x.labels.Generation(ns) }

// KeepsLabels reports whether the label keys kept of the objects of
// namespace ns include those the selectors of locks read
// (LabelKeys.Keeps).
func (x *OwnerIndex) KeepsLabels(ns string, locks []lockv1alpha1.Lock) bool {
	return x.labels.Keeps(ns, locks)
}

// ensure starts the metadata informer of kind k, if the index does not
// have it yet, and indexes it by owner. The informer is the one the
// reconciler's watch of k uses (same cache, same GroupVersionKind).
func (x *OwnerIndex) ensure(ctx context.Context, k ServedKind) error {
	gk := k.GVK.GroupKind()
	x.mu.RLock()
	_, has := x.kinds[gk]
	x.mu.RUnlock()
	if has {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(k.GVK)
	inf, err := x.cache.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting the metadata informer of %s: %w", k.Resource, err)
	}
	ii, ok := inf.(indexedInformer)
	if !ok {
		return fmt.Errorf("the informer of %s is a %T, not a client-go shared index informer", k.Resource, inf)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if _, has := x.kinds[gk]; has {
		return nil
	}
	if err := ii.AddIndexers(toolscache.Indexers{ownerIndex: indexByOwner}); err != nil {
		return fmt.Errorf("indexing %s by owner: %w", k.Resource, err)
	}
	x.kinds[gk] = ii
	x.order = append(x.order, gk)
	return nil
}

// markDiscovered records that kind discovery has added every kind it found
// once: from then on, a kind the index lacks is not one of the group's.
func (x *OwnerIndex) markDiscovered() {
	x.mu.Lock()
	x.discovered = true
	x.mu.Unlock()
}

// Dependents calls fn with each object in namespace ns, of a kind of the
// index, whose ownerReferences name the UID owner, and its kind, until fn
// returns false. The objects are the cache's: read-only. It returns an
// error, calling fn for nothing, while discovery has not run or a kind's
// informer has not synced: the index cannot tell.
func (x *OwnerIndex) Dependents(ns string, owner types.UID, fn func(schema.GroupKind, metav1.Object) bool) error {
	x.mu.RLock()
	discovered, order := x.discovered, x.order
	// On the stack for up to 8 kinds: every DELETE asks.
	var onStack [8]indexedInformer
	informers := onStack[:0]
	for _, gk := range order {
		informers = append(informers, x.kinds[gk])
	}
	x.mu.RUnlock()
	if !discovered {
		return errOwnersNotDiscovered
	}
	for i, inf := range informers {
		if !inf.HasSynced() {
			return fmt.Errorf("the metadata cache of %s has not synced yet", order[i])
		}
	}
	found := takeLookup()
	defer putLookup(found)
	for i, inf := range informers {
		var err error
		if *found, err = cachestore.AppendIndexed((*found)[:0], inf.GetIndexer(), ownerIndex, string(owner)); err != nil {
			return fmt.Errorf("looking up the dependents of %s among %s: %w", owner, order[i], err)
		}
		for _, o := range *found {
			// A Meta (CacheTransform), or a PartialObjectMetadata in a
			// test's store.
			if m, ok := o.(metav1.Object); ok && m.GetNamespace() == ns && !fn(order[i], m) {
				return nil
			}
		}
	}
	return nil
}

// Owner returns the object that ref names in namespace ns, or nil when
// there is none (whatever its UID: the caller compares it); watched is
// false when ref's kind is not one of the index (outside the group,
// cluster-scoped, or not discovered yet), so that the index cannot tell.
func (x *OwnerIndex) Owner(ns string, ref metav1.OwnerReference) (_ metav1.Object, watched bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, false
	}
	x.mu.RLock()
	inf, ok := x.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	x.mu.RUnlock()
	if !ok || !inf.HasSynced() {
		return nil, false
	}
	item, exists, err := inf.GetIndexer().GetByKey(ns + "/" + ref.Name)
	if err != nil || !exists {
		return nil, err == nil
	}
	if m, ok := item.(metav1.Object); ok {
		return m, true
	}
	return nil, true
}

// HasSynced reports whether kind discovery has run once and the informer of
// every kind found has synced: from then on Dependents answers (until
// discovery adds another kind; the webhook reads the API server
// meanwhile, and no readiness check waits for it).
func (x *OwnerIndex) HasSynced() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if !x.discovered {
		return false
	}
	for _, inf := range x.kinds {
		if !inf.HasSynced() {
			return false
		}
	}
	return true
}
