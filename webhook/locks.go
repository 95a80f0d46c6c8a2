package webhook

import (
	"errors"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Locks is the Lock cache every guard reads (in lockguard,
// readmodel.LockIndex): the one read interface of the webhook. Each method
// copies only the Locks it returns, so that a decision never copies every
// Lock of the cluster, and returns an error when it cannot tell (for
// example while its cache has not synced); the guards then fail closed, or
// read the API server's Locks. A cache that holds no Lock of a kind of
// lookup answers it with none (NoLocks): the API server's Locks decide.
type Locks interface {
	// LiveLocks returns the live Locks that target key (those whose
	// Lock.LiveTarget is key), in any order.
	LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error)
	// LiveSelectorLocksCovering returns, for each of objs (objects of
	// namespace ns), copies of the live selector Locks of ns that cover
	// it (Lock.Covers), in the order of objs; nil when the cache keeps
	// no selector Locks (issue 24: a decision in a namespace of many
	// selector Locks costs about what one among as many targetRef Locks
	// does).
	LiveSelectorLocksCovering(ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error)
	// LiveSelectorLocksIn returns copies of the live selector Locks of
	// namespace ns.
	LiveSelectorLocksIn(ns string) ([]lockv1alpha1.Lock, error)
	// LiveSelectorLocksOfKind returns copies of the live selector Locks
	// of every namespace for which Lock.CoversKind(gk) holds.
	LiveSelectorLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error)
	// LiveLocksIn returns copies of the live targetRef Locks of
	// namespace ns.
	LiveLocksIn(ns string) ([]lockv1alpha1.Lock, error)
	// LiveLocksOfKind returns copies of the live Locks of every namespace
	// whose target is of kind gk.
	LiveLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error)
	// AnyLiveLocks returns copies of at most limit live Locks of every
	// namespace, the first by "namespace/name", and how many live Locks
	// there are in all.
	AnyLiveLocks(limit int) (locks []lockv1alpha1.Lock, total int, err error)
	// StandingLocksCover reports whether the cache holds a standing Lock
	// (Lock.Standing: live or expired) that covers one of objs (objects
	// of namespace ns) whatever its expiry and enforcement: a Lock whose
	// expiry or Audit enforcement alone keeps it from protecting, which an
	// update the cache has not seen may have extended or enforced
	// (docs/contract.md rules 19, 20).
	StandingLocksCover(ns string, objs []lockv1alpha1.Object) (bool, error)
}

// Coverage is a Locks that gives, in one read of its index, what a
// decision asks of it for the objects it decides (in lockguard,
// readmodel.LockIndex): LiveLocks and LiveSelectorLocksCovering of each,
// and StandingLocksCover of them all, so that a DELETE reads each index
// entry of its object once. A Locks that is not one is asked those three.
type Coverage interface {
	// LocksCovering returns, for each of objs (objects of namespace ns),
	// in the order of objs, copies of the live Locks that cover it (its
	// targetRef Locks, then the selector Locks of ns that cover it), and
	// whether a standing Lock (StandingLocksCover) covers one of them.
	LocksCovering(ns string, objs []lockv1alpha1.Object) (live [][]lockv1alpha1.Lock, standing bool, err error)
}

// NamespaceHolder is a Locks that tells, copying nothing, whether its
// index holds any Lock of a namespace (in lockguard, readmodel.LockIndex):
// where it holds none, and the Freshness says it lacks none there
// (NamespaceFreshness), no Lock covers anything of that namespace, and
// the guards need read nothing more for it (lockReader.nothingIn).
type NamespaceHolder interface {
	// HoldsLocksIn reports whether the index holds a Lock of ns in any
	// state; an error when it cannot tell (it has not synced).
	HoldsLocksIn(ns string) (bool, error)
}

// NamespaceFreshness is a Freshness that answers MayLack for every key of
// a namespace at once (in lockguard, internal/peers).
type NamespaceFreshness interface {
	// MayLackIn reports whether MayLack may answer true for a key of ns.
	// It is asked before the index, as MayLack is.
	MayLackIn(ns string) bool
}

// NoLocks is a Locks that holds no Lock: every lookup answers none. A fake
// embeds it and answers the lookups it is about.
type NoLocks struct{}

var _ Locks = NoLocks{}

// LiveLocks returns none.
func (NoLocks) LiveLocks(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil }

// LiveSelectorLocksCovering returns nil: no selector Locks are cached.
func (NoLocks) LiveSelectorLocksCovering(string, []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	return nil, nil
}

// LiveSelectorLocksIn returns none.
func (NoLocks) LiveSelectorLocksIn(string) ([]lockv1alpha1.Lock, error) { return nil, nil }

// LiveSelectorLocksOfKind returns none.
func (NoLocks) LiveSelectorLocksOfKind(schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	return nil, nil
}

// LiveLocksIn returns none.
func (NoLocks) LiveLocksIn(string) ([]lockv1alpha1.Lock, error) { return nil, nil }

// LiveLocksOfKind returns none.
func (NoLocks) LiveLocksOfKind(schema.GroupKind) ([]lockv1alpha1.Lock, error) { return nil, nil }

// AnyLiveLocks returns none.
func (NoLocks) AnyLiveLocks(int) ([]lockv1alpha1.Lock, int, error) { return nil, 0, nil }

// StandingLocksCover reports none.
func (NoLocks) StandingLocksCover(string, []lockv1alpha1.Object) (bool, error) { return false, nil }

// errUncached is the error of the lookups of targets of a Handler
// configured without Locks.
var errUncached = errors.New("lockguard is configured without a Lock cache")

// uncached is the Locks of a Handler configured without any (Config.Locks
// nil, as lockguard's lock plugin decides namespace and CRD deletes): the
// lookups of targets fail, so that the object and cascade guards fail
// closed; the namespace and CRD guards read the API server's Locks.
type uncached struct{ NoLocks }

// LiveLocks fails.
func (uncached) LiveLocks(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	return nil, errUncached
}

// LiveSelectorLocksCovering fails.
func (uncached) LiveSelectorLocksCovering(string, []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	return nil, errUncached
}

// LiveSelectorLocksIn fails.
func (uncached) LiveSelectorLocksIn(string) ([]lockv1alpha1.Lock, error) { return nil, errUncached }

// Covering returns, for each of objs, those of selectors (selector Locks
// of the objects' namespace) that cover it at time now (Lock.Covers), in
// the order of objs: LiveSelectorLocksCovering of a Locks that holds its
// selector Locks in a slice.
func Covering(selectors []lockv1alpha1.Lock, objs []lockv1alpha1.Object, now time.Time) [][]lockv1alpha1.Lock {
	out := make([][]lockv1alpha1.Lock, len(objs))
	for i, o := range objs {
		for j := range selectors {
			if selectors[j].Covers(o, now) {
				out[i] = append(out[i], selectors[j])
			}
		}
	}
	return out
}

// Freshness tells when the Lock cache may lack a live Lock of a target
// (in lockguard, internal/peers: a Lock create of the target it was told
// about and the cache has not delivered, or a replica that cannot prove
// it heard of every create). Where it may not, a delete the cache would
// allow is allowed without reading the API server.
type Freshness interface {
	// MayLack reports whether the cache may lack a live Lock of key, and
	// why. It is asked before the cache: what makes it answer false for
	// a Lock (the informer delivered it) happens after the cache holds it.
	MayLack(key lockv1alpha1.TargetKey) (reason string, mayLack bool)
	// Confirmed counts a confirmation made for reason.
	Confirmed(reason string)
	PendingCreates
}

// PendingCreates tells, of one target, whether a Lock create of it was
// admitted and the cache may not have delivered it yet (in lockguard,
// internal/peers: a pending marker), whether or not the replica is warm.
// Where the cache already has a Lock of the target, the delete is denied
// either way; the API server is read only then, so that the denial names
// every Lock (docs/contract.md rule 14). Like MayLack, it is asked before
// the cache.
type PendingCreates interface {
	// PendingCreate reports whether a create of a Lock of key is pending.
	PendingCreate(key lockv1alpha1.TargetKey) bool
}
