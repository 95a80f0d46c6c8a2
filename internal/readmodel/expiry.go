package readmodel

import (
	"time"

	toolscache "k8s.io/client-go/tools/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The LockIndex's reads of expiry (docs/contract.md rule 19), for the
// reconciler: which standing Locks have expired, and when the next one
// will. The guards' reads (index.go, selectorlocks.go) keep the live
// Locks alone.

// ExpiredLocks returns copies of the standing Locks that target key and
// have expired at the index's now (Lock.ExpiredAt), or ErrNotSynced
// before the informer has synced: the Locks whose status says Expired.
func (x *LockIndex) ExpiredLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	if !x.HasSynced() {
		return nil, ErrNotSynced
	}
	objs, err := x.byTarget(key)
	if err != nil {
		return nil, err
	}
	now := x.now()
	return copyLocksIf(objs, func(l lockv1alpha1.Lock) bool { return l.ExpiredAt(now) }), nil
}

// StandingLocksCover reports whether a standing Lock (live or expired)
// covers one of objs (objects of namespace ns) whatever its expiry and
// enforcement: a targetRef Lock of one of their keys, or a selector Lock
// of ns that selects one; or ErrNotSynced before the informer has synced. It copies
// no Lock. The webhook asks it when it finds no live Lock that enforces,
// so that a delete allowed only because a Lock the cache holds has
// expired or is in Audit is confirmed with the API server
// (docs/contract.md rules 19 and 20: an update the cache has not seen may
// have extended or enforced it).
func (x *LockIndex) StandingLocksCover(ns string, objs []lockv1alpha1.Object) (bool, error) {
	if !x.HasSynced() {
		return false, ErrNotSynced
	}
	for _, o := range objs {
		if o.Namespace != ns {
			continue
		}
		key := o.Key()
		found, err := x.byTarget(key)
		if err != nil {
			return false, err
		}
		if len(found) > 0 {
			return true, nil
		}
		selected := false
		if err := x.eachStandingSelectorLock(o, func(any) { selected = true }); err != nil {
			return false, err
		}
		if selected {
			return true, nil
		}
	}
	return false, nil
}

// NextExpiryIn returns how long after now the first standing Lock of
// namespace ns that has not expired will expire, and whether one will.
func (x *LockIndex) NextExpiryIn(ns string, now time.Time) (time.Duration, bool) {
	objs, _ := x.informer.GetIndexer().ByIndex(toolscache.NamespaceIndex, ns)
	var next time.Duration
	found := false
	for _, o := range objs {
		l, ok := lockCore(o)
		if !ok || l.DeletionTimestamp != nil {
			continue
		}
		if d, will := l.ExpiresIn(now); will && (!found || d < next) {
			next, found = d, true
		}
	}
	return next, found
}

// NextExpiry returns how long after now the first of locks that has not
// expired will expire, and whether one will.
func NextExpiry(now time.Time, locks ...[]lockv1alpha1.Lock) (time.Duration, bool) {
	var next time.Duration
	found := false
	for _, ls := range locks {
		for i := range ls {
			if d, will := ls[i].ExpiresIn(now); will && (!found || d < next) {
				next, found = d, true
			}
		}
	}
	return next, found
}
