package webhook

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The one reader of Locks of every guard, and the one place that says when
// a decision is confirmed with the API server.
//
// An informer cache lags the API server: by the milliseconds a watch event
// takes to arrive, and by seconds while a watch reconnects (after a
// kube-apiserver restart, say), all the while reporting itself synced. A
// Lock whose create the client has already seen answered can be missing
// from it, and the delete that follows would go through. So every guard
// reads its Locks here, by one rule: what the cache would deny is denied at
// once (a stale cache only errs towards denying, until it catches up);
// what it would allow is decided again from the API server's Locks, read
// with a consistent list (lists.go: in pages, and one list of a namespace
// in flight at a time, shared by every guard's decisions that wait for
// it). Only the decisions the cache would allow pay for the read, and of
// those only the ones:
//
//   - of a target whose Locks the index cannot give (it has not synced
//     yet): from the API server alone (ReasonUnsynced);
//   - of a target (the object and cascade guards), when the handler has a
//     reader of the API server (without one, lockguard's
//     --cache-only-decisions, the index alone decides) and no Freshness
//     proves that the index lacks no Lock of the targets (internal/peers),
//     or the index holds a Lock of one of them that has expired or is in
//     Audit (an update the index has not seen may have extended or
//     enforced it: only creates are announced, docs/contract.md rules 19
//     and 20);
//   - of an update of an object labelled lockv1alpha1.ReadOnlyLabel that
//     no Lock of the cache freezes (the update guard; ReasonLabelled);
//   - of a namespace or a CustomResourceDefinition (the namespace and CRD
//     guards), always: such deletes are rare, and remove objects without
//     asking admission about each.

// ReasonLowered is the reason a replica confirms an allowed delete, as
// lockguard_confirmations_total counts it, when the only Locks its cache
// holds of the target protect nothing now: expired, or in Audit
// enforcement (lockReader.covering). An update the cache has not seen may
// have extended or enforced one, and updates are not announced as creates
// are.
const ReasonLowered = "lowered"

// ReasonLabelled is the reason a replica confirms an allowed update, as
// lockguard_confirmations_total counts it, when the object carries
// lockv1alpha1.ReadOnlyLabel (the reconciler put it on for a ReadOnly Lock)
// and no Lock the cache holds of it is ReadOnly: the cache has not seen the
// Lock's create or its update to ReadOnly (docs/contract.md rule 16), which
// the reconciler, reading its own cache, has (readOnlyGuard.readOnlyLocks).
const ReasonLabelled = "labelled"

// ReasonUnsynced is the reason a replica reads a decision's Locks from the
// API server alone, as lockguard_confirmations_total counts it, when its
// Lock index cannot answer: it has not synced yet (lockReader.unindexed).
const ReasonUnsynced = "unsynced"

// lockReader reads the live Locks that the guards decide from.
type lockReader struct {
	cache Locks     // the Lock cache
	fresh Freshness // nil: the cache may always lack a Lock
	api   *apiLists // the API server's Locks; nil: none are read
	// confirm is whether what the cache would allow for a target is
	// confirmed with the API server (false: --cache-only-decisions).
	confirm bool
	// now is the clock a Lock is live by (Lock.Live, docs/contract.md
	// rule 19): the Locks read from the API server are kept by it, and
	// cache's must be kept by the same.
	now func() time.Time
}

// newLockReader returns a reader of cache (nil: uncached) that confirms the
// decisions of targets by listing through live (nil: it confirms none of
// them, and the namespace and CRD guards list through api), asking fresh
// (nil: none) which ones to confirm.
//
// now (nil: time.Now) is the clock Locks are live by.
func newLockReader(cache Locks, live, api LockLister, fresh Freshness, now func() time.Time) *lockReader {
	if cache == nil {
		cache = uncached{}
	}
	if now == nil {
		now = time.Now
	}
	r := &lockReader{cache: cache, fresh: fresh, confirm: live != nil, now: now}
	switch {
	case live != nil:
		r.api = newAPILists(live, now)
	case api != nil:
		r.api = newAPILists(api, now)
	}
	return r
}

// keyOf is the key of the object name of kind gk in namespace ns, the one
// way the guards name a target.
func keyOf(ns string, gk schema.GroupKind, name string) lockv1alpha1.TargetKey {
	return lockv1alpha1.TargetKey{Namespace: ns, Group: gk.Group, Kind: gk.Kind, Name: name}
}

// find returns the live Locks that cover o (covering of one object).
func (r *lockReader) find(ctx context.Context, o lockv1alpha1.Object) ([]lockv1alpha1.Lock, error) {
	if r.nothingIn(o.Namespace) {
		// What covering finds then, without its slices: the usual
		// delete, of an object of a namespace holding no Lock.
		return nil, nil
	}
	found, err := r.held(ctx, o.Namespace, []lockv1alpha1.Object{o})
	if err != nil {
		return nil, err
	}
	return found[0], nil
}

// covering returns the live Locks that cover each of objs (Lock.Covers:
// its targetRef Locks and the selector Locks of ns its labels match), the
// distinct objects of namespace ns, in the order of objs: from the index,
// and, when the handler confirms and the Freshness (asked first) says that
// the index may lack one, from a list of the namespace's Locks read from
// the API server too: when the index has none of them, or when a create of
// a Lock of one of them is pending (PendingCreates). It returns an error when
// the index cannot answer or the API server cannot be read.
func (r *lockReader) covering(ctx context.Context, ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	if r.nothingIn(ns) {
		// What held finds then: no Lock, and nothing to read.
		return make([][]lockv1alpha1.Lock, len(objs)), nil
	}
	return r.held(ctx, ns, objs)
}

// held is covering where nothingIn(ns) is false.
func (r *lockReader) held(ctx context.Context, ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	// Before the index: see Freshness.MayLack.
	reason, mayLack := r.mayLack(objs)
	pending := mayLack && r.pendingCreate(objs)
	found, known, covered, err := r.indexed(ns, objs)
	if err != nil {
		return r.unindexed(ctx, ns, objs, err)
	}
	// Only a Lock that enforces denies from the index alone: an audit
	// Lock refuses nothing, so the API server may still hold one that
	// does.
	cached := slices.ContainsFunc(found, func(locks []lockv1alpha1.Lock) bool { return slices.ContainsFunc(locks, enforces) })
	// A Lock the cache holds may not protect only because it has expired
	// or is in Audit, and an update the cache has not seen may have
	// extended or enforced it: updates are not announced as creates are
	// (docs/contract.md rules 19, 20). Asked after the live Locks (or in
	// the same read of a Coverage, where every Lock seen is standing): a
	// cache that has the update by then shows the Lock standing here too.
	if r.confirm && !mayLack && !cached {
		standing := covered
		if !known {
			if standing, err = r.cache.StandingLocksCover(ns, objs); err != nil {
				return nil, err
			}
		}
		if standing {
			reason, mayLack = ReasonLowered, true
		}
	}
	// A denial names every Lock that covers the object (docs/contract.md rule
	// 14): when a create of a Lock of one of objs is pending
	// (PendingCreates), the API server is read even if the index already
	// denies. Otherwise the index's Locks deny at once: reading on every
	// denial (of a cold replica, or without a Freshness) would let a
	// delete loop cost a list each.
	if !r.confirm || !mayLack || (cached && !pending) {
		return found, nil
	}
	return r.reread(ctx, ns, objs, found, reason, cached)
}

// nothingIn reports whether no Lock covers anything of namespace ns and
// covering would read nothing for it: the index has synced and holds no
// Lock of ns in any state (NamespaceHolder), and, when the handler
// confirms, the Freshness says the index lacks none of ns
// (NamespaceFreshness: warm, no Lock create of ns pending; asked first,
// as MayLack is). covering answers from it at once (readmodel's
// TestHoldsLocksInAgrees checks that the index's lookups find no Lock
// where HoldsLocksIn says none), and the cascade guard asks it before
// walking: a cascade deletes only objects of the owner's namespace. A
// reader that cannot tell answers false.
func (r *lockReader) nothingIn(ns string) bool {
	h, ok := r.cache.(NamespaceHolder)
	if !ok {
		return false
	}
	if r.confirm {
		if f, ok := r.fresh.(NamespaceFreshness); !ok || f.MayLackIn(ns) {
			return false
		}
	}
	held, err := h.HoldsLocksIn(ns)
	return err == nil && !held
}

// indexed returns the live Locks that cover each of objs (objects of
// namespace ns) in the index, in the order of objs, and, when known,
// whether a standing Lock of the index covers one of them
// (Locks.StandingLocksCover): from one read of the index when it is a
// Coverage; otherwise from LiveLocks and LiveSelectorLocksCovering, not
// known (covering asks StandingLocksCover when it needs to, after them: a
// cache that has an update by then shows the Lock standing there too).
func (r *lockReader) indexed(ns string, objs []lockv1alpha1.Object) (found [][]lockv1alpha1.Lock, known, covered bool, err error) {
	if c, ok := r.cache.(Coverage); ok {
		found, covered, err := c.LocksCovering(ns, objs)
		return found, true, covered, err
	}
	selected, err := r.cache.LiveSelectorLocksCovering(ns, objs)
	if err != nil {
		return nil, false, false, err
	}
	found = make([][]lockv1alpha1.Lock, len(objs))
	for i, o := range objs {
		locks, err := r.cache.LiveLocks(o.Key())
		if err != nil {
			return nil, false, false, err
		}
		if selected != nil {
			locks = append(locks, selected[i]...)
		}
		found[i] = locks
	}
	return found, false, false, nil
}

// unindexed returns covering's answer when the index cannot give one
// (cause: it has not synced yet, as in a replica that just started): read
// from the API server alone when the handler confirms (so that a replica
// decides before its cache has synced, and never from less than the API
// server holds), counted under ReasonUnsynced; cause otherwise.
func (r *lockReader) unindexed(ctx context.Context, ns string, objs []lockv1alpha1.Object, cause error) ([][]lockv1alpha1.Lock, error) {
	if !r.confirm {
		return nil, cause
	}
	found, err := r.reread(ctx, ns, objs, make([][]lockv1alpha1.Lock, len(objs)), ReasonUnsynced, false)
	if err != nil {
		return nil, fmt.Errorf("%w, and %w", cause, err)
	}
	return found, nil
}

// reread returns found (the Locks of each of objs, objects of namespace
// ns, from the cache) with the live Locks of ns read from the API server
// merged in (withLock), counting the read under reason
// (lockguard_confirmations_total). When the read fails it returns found if
// denies (the cache's Locks deny already: the read only adds names), an
// error otherwise.
func (r *lockReader) reread(ctx context.Context, ns string, objs []lockv1alpha1.Object, found [][]lockv1alpha1.Lock, reason string, denies bool) ([][]lockv1alpha1.Lock, error) {
	r.confirmed(reason)
	all, err := r.api.namespace(ctx, ns)
	if err != nil && denies {
		ctrl.LoggerFrom(ctx).V(1).Info("Denied from the Lock cache alone: reading the pending Lock from the API server failed", "namespace", ns, "error", err.Error())
		return found, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the Locks of namespace %s from the API server: %w", ns, err)
	}
	index := make(map[lockv1alpha1.TargetKey]int, len(objs))
	for i, o := range objs {
		index[o.Key()] = i
	}
	lagged := 0
	now := r.now()
	for i := range all {
		l := &all[i]
		if target, live := l.LiveTarget(now); live {
			if j, ok := index[target]; ok {
				lagged += withLock(&found[j], l)
			}
			continue
		}
		for j, o := range objs {
			if l.HasSelector() && l.Covers(o, now) {
				lagged += withLock(&found[j], l)
			}
		}
	}
	if lagged > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Lock cache lagged: the API server has Locks the cache has not seen yet",
			"namespace", ns, "targets", len(objs), "locks", lagged)
	}
	return found, nil
}

// confirmed counts a read of the API server made for reason
// (lockguard_confirmations_total), when the handler has a Freshness.
func (r *lockReader) confirmed(reason string) {
	if r.fresh != nil {
		r.fresh.Confirmed(reason)
	}
}

// withLock puts a copy of l, a live Lock read from the API server, into
// *locks (Locks of one namespace from the cache): in place of the cache's
// copy of the same name when that is of another resourceVersion (the
// cache lags: an update it has not seen may have extended or enforced
// the Lock, docs/contract.md rules 19 and 20), else added. It returns 1
// when it changed *locks, 0 when the cache had l already.
func withLock(locks *[]lockv1alpha1.Lock, l *lockv1alpha1.Lock) int {
	i := slices.IndexFunc(*locks, func(c lockv1alpha1.Lock) bool { return c.Name == l.Name })
	switch {
	case i < 0:
		*locks = append(*locks, *l.DeepCopy())
	case (*locks)[i].ResourceVersion != l.ResourceVersion:
		(*locks)[i] = *l.DeepCopy()
	default:
		return 0
	}
	return 1
}

// selectorsMayCover returns the live selector Locks of namespace ns that
// enforce (Lock.Enforces: an audit Lock refuses nothing) and could cover
// an object of kind gk whatever its labels (Lock.CoversKind), from the
// cache and, when the handler confirms, from the API server: the Locks a
// guard that cannot read an object's labels fails closed on.
func (r *lockReader) selectorsMayCover(ctx context.Context, ns string, gk schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	all, err := r.cache.LiveSelectorLocksIn(ns)
	if err != nil && !r.confirm {
		return nil, err
	}
	all = slices.DeleteFunc(all, audits) // An index that cannot answer has none.
	if len(all) == 0 && r.confirm {
		live, err := r.api.namespace(ctx, ns)
		if err != nil {
			return nil, fmt.Errorf("reading the Locks of namespace %s from the API server: %w", ns, err)
		}
		all = live
	}
	var out []lockv1alpha1.Lock
	now := r.now()
	for i := range all {
		if all[i].HasSelector() && all[i].Enforces() && all[i].CoversKind(gk, now) {
			out = append(out, *all[i].DeepCopy())
		}
	}
	return out, nil
}

// mayLack reports whether the index may lack a live Lock of one of objs,
// and why (the first reason). Without a Freshness, it may.
func (r *lockReader) mayLack(objs []lockv1alpha1.Object) (string, bool) {
	if r.fresh == nil {
		return "", true
	}
	for _, o := range objs {
		if reason, mayLack := r.fresh.MayLack(o.Key()); mayLack {
			return reason, true
		}
	}
	return "", false
}

// pendingCreate reports whether the Freshness has a
// Lock create of one of objs pending.
func (r *lockReader) pendingCreate(objs []lockv1alpha1.Object) bool {
	if r.fresh == nil {
		return false
	}
	for _, o := range objs {
		if r.fresh.PendingCreate(o.Key()) {
			return true
		}
	}
	return false
}
