package readmodel

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// targetIndex is the name of the index NewLockIndex adds to the Lock
// informer: standing Locks by the bucket of their target's
// lockv1alpha1.TargetKey.String (bucket): a lookup keeps, of its bucket,
// the Locks of the target looked up (byTarget).
//
// The indexes hold standing Locks (Lock.Standing): whether a Lock counts
// whatever the time is decided once, when it enters them. Whether it has
// expired depends on the time, which no index can hold: every read of the
// LockIndex keeps only the Locks live at its clock's now (Lock.Live,
// docs/contract.md rule 19), so a Lock stops counting at its expiry
// without any event, on every replica at once.
const targetIndex = "lockguard.target"

// indexByTarget is the targetIndex function: a standing Lock is indexed by
// its target (Lock.StandingTarget), any other Lock not at all.
func indexByTarget(obj any) ([]string, error) {
	l, ok := lockCore(obj)
	if !ok {
		return nil, nil
	}
	if key, standing := l.StandingTarget(); standing {
		return []string{targetBucket(key)}, nil
	}
	return nil, nil
}

// kindIndex is the name of the index NewLockIndex adds to the Lock
// informer beside targetIndex: live Locks by the group and kind of their
// target (schema.GroupKind.String, "Kind.group"), so that the CRD guard
// reads the Locks of one kind, not every Lock of the cluster.
const kindIndex = "lockguard.target-kind"

// indexByTargetKind is the kindIndex function: a live targetRef Lock is
// indexed by its target's group and kind, a live selector Lock by
// selectorKinds (once, whatever its kinds), any other Lock not at all.
func indexByTargetKind(obj any) ([]string, error) {
	l, ok := lockCore(obj)
	if !ok {
		return nil, nil
	}
	if key, standing := l.StandingTarget(); standing {
		return []string{key.GroupKind().String()}, nil
	}
	if l.HasSelector() && l.Standing() {
		return []string{selectorKinds}, nil
	}
	return nil, nil
}

// selectorKinds is the kindIndex value of every live selector Lock: no
// "Kind.group" string is "*", and a selector Lock is counted once in
// AnyLiveLocks whatever kinds it names.
const selectorKinds = "*"

// selectorIndex is the name of the index NewLockIndex adds beside
// targetIndex: live selector Locks by namespace, so that a lookup for an
// object reads the selector Locks of its namespace, not all its Locks.
const selectorIndex = "lockguard.selector"

// indexBySelector is the selectorIndex function: a live selector Lock is
// indexed by its namespace, any other Lock not at all.
//
// Whether a Lock is live is decided here once, when the Lock enters the
// index (Lock.Standing validates its selector), not at each decision: the
// store never changes an object it holds, and replaces it, in every
// index at once and under its lock, when the Lock changes. So a Lock read
// from the selector index is live, and covers an object when it selects
// it (Lock.Selects, which parses nothing). A Lock's update (its status
// written, say) never takes it out of the index even for a moment: a
// reader sees the old object or the new one, both in it.
func indexBySelector(obj any) ([]string, error) {
	l, ok := lockCore(obj)
	if !ok || !l.HasSelector() || !l.Standing() {
		return nil, nil
	}
	return []string{l.Namespace}, nil
}

// indexedInformer is what a controller-runtime informer is underneath:
// client-go's shared index informer.
type indexedInformer interface {
	HasSynced() bool
	AddEventHandler(toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error)
	AddIndexers(toolscache.Indexers) error
	GetIndexer() toolscache.Indexer
}

// ErrNotSynced is returned by a LockIndex whose informer has not synced.
var ErrNotSynced = errors.New("the Lock cache has not synced yet")

// LockIndex finds live Locks by target in the Lock informer of a cache:
// the cost of a lookup grows with the number of matching Locks, not with
// all Locks, and it makes no API call. The webhook and the reconciler look
// Locks up through it alike.
type LockIndex struct {
	informer indexedInformer
	// now is the clock the reads keep live Locks by (Lock.Live).
	now func() time.Time
}

// NewLockIndex adds the indexes by target, by target kind and of selector
// Locks by namespace and by coverage (coverageIndex) to the Lock
// informer of c and returns it. Call it before c starts. The indexes are
// on the informer itself, one value per Lock each, where a
// controller-runtime field index keeps two (the namespace's and all
// namespaces'), each a set of its own.
func NewLockIndex(ctx context.Context, c cache.Informers) (*LockIndex, error) {
	inf, err := c.GetInformer(ctx, &lockv1alpha1.Lock{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("getting the Lock informer: %w", err)
	}
	ii, ok := inf.(indexedInformer)
	if !ok {
		return nil, fmt.Errorf("the Lock informer is a %T, not a client-go shared index informer", inf)
	}
	if err := ii.AddIndexers(toolscache.Indexers{targetIndex: indexByTarget, kindIndex: indexByTargetKind, selectorIndex: indexBySelector, coverageIndex: indexByCoverage}); err != nil {
		return nil, fmt.Errorf("indexing Locks by target: %w", err)
	}
	return &LockIndex{informer: ii, now: time.Now}, nil
}

// SetClock makes the index's reads keep the Locks live at now() rather
// than at time.Now(): the one clock of the webhook, the reconciler and
// the index, which tests set to decide at a given instant. Call it before
// the index is read.
func (x *LockIndex) SetClock(now func() time.Time) { x.now = now }

// Now returns the time of the index's clock.
func (x *LockIndex) Now() time.Time { return x.now() }

// HasSynced reports whether the Lock informer has synced, so that
// LiveLocks answers. It is a readiness check.
func (x *LockIndex) HasSynced() bool { return x.informer.HasSynced() }

// Names reports whether a standing Lock (live or expired) targets key,
// copying none; or ErrNotSynced before the informer has synced.
func (x *LockIndex) Names(key lockv1alpha1.TargetKey) (bool, error) {
	if !x.HasSynced() {
		return false, ErrNotSynced
	}
	named := false
	err := x.eachByTarget(key, func(any) { named = true })
	return named, err
}

// LiveLocks returns copies of the live Locks that target key, or
// ErrNotSynced before the informer has synced.
func (x *LockIndex) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := x.byTarget(key)
	if err != nil {
		return nil, err
	}
	return x.copyLive(objs), nil
}

// copyLive returns copies of the Locks among objs (standing Locks) that
// are live at the index's now, nil for none.
func (x *LockIndex) copyLive(objs []any) []lockv1alpha1.Lock {
	now := x.now()
	return copyLocksIf(objs, func(l lockv1alpha1.Lock) bool { return liveIndexed(&l, now) })
}

// liveIndexed is Lock.Live of a Lock read from the indexes, which hold
// standing Locks alone: it is live at now unless it has expired. It
// validates no selector again (issue 24).
func liveIndexed(l *lockv1alpha1.Lock, now time.Time) bool { return !l.ExpiredAt(now) }

// LiveLocksOfKind returns copies of the live targetRef Locks, in every
// namespace, whose target is of kind gk, or ErrNotSynced before the
// informer has synced. It copies no Lock of another kind, and no selector
// Lock (LiveSelectorLocksOfKind).
func (x *LockIndex) LiveLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := x.informer.GetIndexer().ByIndex(kindIndex, gk.String())
	if err != nil {
		return nil, fmt.Errorf("looking up the Locks of kind %s: %w", gk, err)
	}
	return x.copyLive(objs), nil
}

// AnyLiveLocks returns copies of at most limit live Locks of every
// namespace, the first by "namespace/name" (sorted), and how many live Locks
// there are in all; or ErrNotSynced before the informer has synced. It
// copies no other Lock: the rest are only counted.
func (x *LockIndex) AnyLiveLocks(limit int) (_ []lockv1alpha1.Lock, total int, _ error) {
	if !x.HasSynced() {
		return nil, 0, ErrNotSynced
	}
	indexer := x.informer.GetIndexer()
	now := x.now()
	// first holds the first limit Locks seen so far, in order.
	first := make([]any, 0, max(limit, 0))
	for _, kind := range indexer.ListIndexFuncValues(kindIndex) {
		objs, err := indexer.ByIndex(kindIndex, kind)
		if err != nil {
			return nil, 0, fmt.Errorf("looking up the Locks of kind %s: %w", kind, err)
		}
		for _, o := range objs {
			l, ok := lockCore(o)
			if !ok || !liveIndexed(&l, now) {
				continue
			}
			total++
			if limit <= 0 {
				continue
			}
			i, _ := slices.BinarySearchFunc(first, lockName(o), func(f any, name types.NamespacedName) int { return compareLocks(lockName(f), name) })
			if i >= limit {
				continue
			}
			if len(first) == limit {
				first = first[:limit-1]
			}
			first = slices.Insert(first, i, o)
		}
	}
	locks := make([]lockv1alpha1.Lock, 0, len(first))
	for _, o := range first {
		locks = append(locks, copyLock(o))
	}
	return locks, total, nil
}

// compareLocks orders Locks by "namespace/name", as the webhook sorts the
// Locks it names and as the API server lists them, without building the
// strings: "a-b/x" comes before "a/x".
func compareLocks(a, b types.NamespacedName) int {
	if a.Namespace == b.Namespace {
		return strings.Compare(a.Name, b.Name)
	}
	n := min(len(a.Namespace), len(b.Namespace))
	if c := strings.Compare(a.Namespace[:n], b.Namespace[:n]); c != 0 {
		return c
	}
	// One namespace starts with the other, which the slash follows.
	if len(a.Namespace) == n {
		return cmp.Compare('/', b.Namespace[n])
	}
	return cmp.Compare(a.Namespace[n], '/')
}

// HasUID reports whether the informer's store holds the Lock
// namespace/name with that UID.
func (x *LockIndex) HasUID(namespace, name string, uid types.UID) bool {
	o, ok, err := x.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return false
	}
	switch l := o.(type) {
	case *CachedLock:
		return l.hasUID(uid)
	case *lockv1alpha1.Lock:
		return l.UID == uid
	}
	return false
}

// OnDelivered calls fn with the UID of every Lock the informer delivers
// (added, updated or deleted), after its store reflects it.
func (x *LockIndex) OnDelivered(fn func(types.UID)) error {
	uidOf := func(o any) {
		if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
			o = d.Obj
		}
		if uid, ok := lockUID(o); ok {
			fn(uid)
		}
	}
	_, err := x.informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    uidOf,
		UpdateFunc: func(_, o any) { uidOf(o) },
		DeleteFunc: uidOf,
	})
	return err
}

// EachReadiness calls fn with the status.active of every Lock in the
// informer, whether it has a Ready condition and that condition's reason,
// copying no Lock: what lockguard_locks counts.
func (x *LockIndex) EachReadiness(fn func(active, ready bool, reason string)) {
	for _, o := range x.informer.GetIndexer().List() {
		if active, ready, reason, ok := lockReadiness(o); ok {
			fn(active, ready, reason)
		}
	}
}

// HoldsLocksIn reports whether the index holds any Lock of namespace ns,
// whatever its state (expired, in Audit, deleted, of any level or
// scope): when it holds none, none of its Locks covers anything of ns.
// It copies nothing (every DELETE review asks it: webhook's
// lockReader.nothingIn). ErrNotSynced before the informer has synced.
func (x *LockIndex) HoldsLocksIn(ns string) (bool, error) {
	if !x.HasSynced() {
		return false, ErrNotSynced
	}
	held, err := cachestore.AnyIndexed(x.informer.GetIndexer(), toolscache.NamespaceIndex, ns)
	if err != nil {
		return false, fmt.Errorf("looking up the Locks of namespace %s: %w", ns, err)
	}
	return held, nil
}

// HasLiveLocksIn reports whether namespace ns holds a Lock live now,
// targetRef or selector, in the Lock cache (the namespace label's
// question).
func (x *LockIndex) HasLiveLocksIn(ns string) (bool, error) {
	now := x.now()
	objs, err := x.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
	if err != nil {
		return false, fmt.Errorf("looking up the Locks of namespace %s: %w", ns, err)
	}
	for _, o := range objs {
		if l, ok := lockCore(o); ok && l.Live(now) {
			return true, nil
		}
	}
	return false, nil
}

// LiveTargetsIn returns the targets of the live Locks of namespace ns, in
// the Lock cache, one per Lock.
func (x *LockIndex) LiveTargetsIn(ns string) []lockv1alpha1.TargetKey {
	now := x.now()
	objs, _ := x.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
	var out []lockv1alpha1.TargetKey
	for _, o := range objs {
		if l, ok := lockCore(o); ok {
			if key, live := l.LiveTarget(now); live {
				out = append(out, key)
			}
		}
	}
	return out
}

// LiveLocksIn returns copies of the live targetRef Locks of namespace ns
// (LiveSelectorLocksIn has its selector Locks), or
// ErrNotSynced before the informer has synced. It never copies the Locks
// of every namespace (ns "" has none): the CRD guard reads those of one
// kind (LiveLocksOfKind) or a few (AnyLiveLocks).
func (x *LockIndex) LiveLocksIn(ns string) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := x.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
	if err != nil {
		return nil, fmt.Errorf("looking up the Locks of namespace %s: %w", ns, err)
	}
	now := x.now()
	var locks []lockv1alpha1.Lock
	for _, o := range objs {
		if l, ok := lockCore(o); ok {
			if _, live := l.LiveTarget(now); live {
				locks = append(locks, copyLock(o))
			}
		}
	}
	return locks, nil
}
