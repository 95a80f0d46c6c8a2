package readmodel

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The LockIndex's lookups of selector Locks: by namespace, by the kinds
// they could cover, and by the objects they cover (coverage.go's index).

// LiveSelectorLocksOfKind returns copies of the live selector Locks, in
// every namespace, that could cover an object of kind gk
// (Lock.CoversKind), or ErrNotSynced before the informer has synced.
func (x *LockIndex) LiveSelectorLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := x.informer.GetIndexer().ByIndex(kindIndex, selectorKinds)
	if err != nil {
		return nil, fmt.Errorf("looking up the selector Locks: %w", err)
	}
	now := x.now()
	return copyLocksIf(objs, func(l lockv1alpha1.Lock) bool { return l.CoversKind(gk, now) }), nil
}

// LiveSelectorLocksIn returns copies of the live selector Locks of
// namespace ns, or ErrNotSynced before the informer has synced.
func (x *LockIndex) LiveSelectorLocksIn(ns string) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := x.informer.GetIndexer().ByIndex(selectorIndex, ns)
	if err != nil {
		return nil, fmt.Errorf("looking up the selector Locks of namespace %s: %w", ns, err)
	}
	return x.copyLive(objs), nil
}

// LiveLocksCovering returns copies of the live Locks that cover o
// (Lock.Covers): the targetRef Locks of its key and the selector Locks of
// its namespace that match its kind and labels; or ErrNotSynced before the
// informer has synced.
func (x *LockIndex) LiveLocksCovering(o lockv1alpha1.Object) ([]lockv1alpha1.Lock, error) {
	locks, err := x.LiveLocks(o.Key())
	if err != nil {
		return nil, err
	}
	return x.LiveLocksCoveringWith(o, locks)
}

// LiveLocksCoveringWith is LiveLocksCovering for a caller that has read
// o's targetRef Locks already (LiveLocks of its key, whose statuses it
// writes): those, then copies of the selector Locks of o's namespace that
// cover it. targetRef is not changed.
func (x *LockIndex) LiveLocksCoveringWith(o lockv1alpha1.Object, targetRef []lockv1alpha1.Lock) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	locks := slices.Clip(targetRef)
	err := x.eachSelectorLock(o, func(obj any) { locks = append(locks, copyLock(obj)) })
	return locks, err
}

// LiveSelectorLocksCovering returns, for each of objs (objects of namespace
// ns), copies of the live selector Locks of ns that cover it (Lock.Covers),
// in the order of objs; or ErrNotSynced before the informer has synced.
// It reads only the selector Locks that each object's labels could match
// (coverageIndex), copies only those it returns (each once), and
// validates no selector: a decision in a namespace of many selector Locks
// costs about what one among as many targetRef Locks does (issue 24).
func (x *LockIndex) LiveSelectorLocksCovering(ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	out := make([][]lockv1alpha1.Lock, len(objs))
	var copies copier
	for i, o := range objs {
		if o.Namespace != ns {
			continue
		}
		err := x.eachSelectorLock(o, func(obj any) { out[i] = append(out[i], copies.of(obj)) })
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LocksCovering is LiveLocks and LiveSelectorLocksCovering of objs
// (objects of namespace ns) together, and StandingLocksCover, in one read
// of the index: for each of objs, in its order, copies of the live Locks
// that cover it (its targetRef Locks, then the selector Locks of ns that
// cover it), and whether a standing Lock (live or expired, whatever its
// enforcement) covers one of them; or ErrNotSynced before the informer
// has synced. Each index entry of an object is read once, where the three
// read the target's twice and its selector Locks twice (webhook.Coverage).
func (x *LockIndex) LocksCovering(ns string, objs []lockv1alpha1.Object) (live [][]lockv1alpha1.Lock, standing bool, err error) {
	if !x.HasSynced() {
		return nil, false, ErrNotSynced
	}
	now := x.now()
	live = make([][]lockv1alpha1.Lock, len(objs))
	var copies copier
	for i, o := range objs {
		key := o.Key()
		found, err := x.byTarget(key)
		if err != nil {
			return nil, false, err
		}
		live[i] = copyLocksIf(found, func(l lockv1alpha1.Lock) bool { return liveIndexed(&l, now) })
		if o.Namespace != ns {
			continue
		}
		standing = standing || len(found) > 0
		err = x.eachStandingSelectorLock(o, func(obj any) {
			standing = true
			if l, _ := lockCore(obj); liveIndexed(&l, now) {
				live[i] = append(live[i], copies.of(obj))
			}
		})
		if err != nil {
			return nil, false, err
		}
	}
	return live, standing, nil
}

// copier copies the cache's Locks for one lookup, each once however many
// objects it covers (a selector Lock may cover several), by the store's
// object.
type copier map[any]*lockv1alpha1.Lock

// of returns the lookup's copy of obj, a Lock of the store (copyLock).
func (c *copier) of(obj any) lockv1alpha1.Lock {
	cp, ok := (*c)[obj]
	if !ok {
		if *c == nil {
			*c = copier{}
		}
		l := copyLock(obj)
		cp = &l
		(*c)[obj] = cp
	}
	return *cp
}

// copyLocksIf returns copies of the Locks among objs that keep accepts,
// nil for none. keep is given the Lock as lockCore reads it, by value so
// that it stays off the heap.
func copyLocksIf(objs []any, keep func(lockv1alpha1.Lock) bool) []lockv1alpha1.Lock {
	var locks []lockv1alpha1.Lock
	for _, o := range objs {
		if l, ok := lockCore(o); ok && keep(l) {
			locks = append(locks, copyLock(o))
		}
	}
	return locks
}
