package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// LockIndex holds the Locks of an informer cache, indexed by target (in
// lockguard, readmodel.LockIndex).
type LockIndex interface {
	// LiveLocks returns the live Locks that target key (those whose
	// Lock.LiveTarget is key), in any order. It returns an error when it
	// cannot tell, for example while its cache has not synced; the handler
	// then fails closed.
	LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error)
}

// LockIndexFunc adapts a function to a LockIndex.
type LockIndexFunc func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error)

// LiveLocks calls f.
func (f LockIndexFunc) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	return f(key)
}

// LockLister reads Locks from the API server (in lockguard, the manager's
// APIReader): a LockList of one namespace, with client.InNamespace.
type LockLister interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// confirmTimeout bounds the read that confirms an allowed delete when the
// context of the confirmation has no deadline (ServeHTTP gives it the
// review's timeout less a margin; Handle's caller may give none).
const confirmTimeout = 3 * time.Second

// confirmPageSize is how many Locks one page of the confirming read holds:
// a namespace with many Locks is read in pages, so that neither the API
// server nor lockguard builds one response of all of them. The pages of
// one list are one snapshot: the API server serves every page after the
// first at the first page's resourceVersion (from etcd, or on 1.34 and
// later from a snapshot of its watch cache), and the first is a consistent
// read, like an unpaginated list. A page it can no longer serve (410
// Expired after a compaction) fails the read: fail closed.
const confirmPageSize = listPageSize

// maxNamespaceReads bounds the reads of one namespace in flight.
const maxNamespaceReads = 1

// lockFinder finds the live Locks of a target: in the index when it has
// any, otherwise in a list of the namespace's Locks read from the API
// server.
//
// An informer cache lags the API server: by the milliseconds a watch event
// takes to arrive, and by seconds while a watch reconnects (after a
// kube-apiserver restart, say), all the while reporting itself synced. A
// Lock whose create the client has already seen answered can be missing
// from it, and the delete that follows would go through. So a DELETE the
// cache would allow is decided again from a list of the namespace's Locks
// read from the API server (a consistent read); one the cache denies is
// denied at once (a stale cache only errs towards denying, until it
// catches up). Only allowed deletes pay for the read.
//
// Confirmations of one namespace share their reads when there are many: a
// namespace has at most maxNamespaceReads reads in flight; confirmations
// that arrive beyond that wait together for the next read, which starts as
// soon as one in flight ends. Every confirmation is thus answered by a read
// that started after it arrived, and a burst of deletes (a garbage
// collector cascade, say) costs a few reads rather than one each.
type lockFinder struct {
	index LockIndex
	live  LockLister // nil: the index alone decides
	fresh Freshness  // nil: every delete the index would allow is confirmed

	mu         sync.Mutex
	namespaces map[string]*namespaceReads
}

// namespaceReads are the reads of one namespace.
type namespaceReads struct {
	running int            // reads in flight
	pending *namespaceRead // the read waiting for a slot, which new confirmations join
}

// namespaceRead is one list of a namespace's Locks from the API server,
// shared by the confirmations that joined it before it started.
type namespaceRead struct {
	waiters  int           // confirmations that joined it
	deadline time.Time     // the latest of theirs: the read's own
	done     chan struct{} // closed when locks and err are set
	locks    []lockv1alpha1.Lock
	err      error
}

func newLockFinder(index LockIndex, live LockLister) *lockFinder {
	return &lockFinder{index: index, live: live, namespaces: map[string]*namespaceReads{}}
}

// Freshness tells when the Lock index may lack a live Lock of a target
// (in lockguard, internal/peers: a Lock create of the target it was told
// about and the index has not delivered, or a replica that cannot prove
// it heard of every create). Where it may not, a delete the index would
// allow is allowed without reading the API server.
type Freshness interface {
	// MayLack reports whether the index may lack a live Lock of key, and
	// why. It is asked before the index: what makes it answer false for
	// a Lock (the informer delivered it) happens after the index holds it.
	MayLack(key lockv1alpha1.TargetKey) (reason string, mayLack bool)
	// Confirmed counts a confirmation made for reason.
	Confirmed(reason string)
}

// WithFreshness makes the handler confirm with the API server only the
// deletes of targets whose Locks f says the index may lack. Without it,
// every delete the index would allow is confirmed.
func WithFreshness(f Freshness) Option { return func(h *Handler) { h.locks.fresh = f } }

// find returns the live Locks that target key: from the index when it has
// any, otherwise, when the index may lack one (Freshness), from the API
// server. It returns an error when the index cannot answer or the API
// server cannot be read.
func (f *lockFinder) find(ctx context.Context, key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	reason, mayLack := "", true
	if f.fresh != nil {
		// Before the index: see Freshness.MayLack.
		reason, mayLack = f.fresh.MayLack(key)
	}
	locks, err := f.index.LiveLocks(key)
	if err != nil || len(locks) > 0 || f.live == nil || !mayLack {
		return locks, err
	}
	if f.fresh != nil {
		f.fresh.Confirmed(reason)
	}
	all, err := f.read(ctx, key.Namespace)
	if err != nil {
		return nil, fmt.Errorf("reading the Locks of namespace %s from the API server: %w", key.Namespace, err)
	}
	for i := range all {
		if target, live := all[i].LiveTarget(); live && target == key {
			locks = append(locks, *all[i].DeepCopy())
		}
	}
	if len(locks) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Lock cache lagged: the API server has Locks the cache has not seen yet",
			"kind", key.GroupKind(), "namespace", key.Namespace, "name", key.Name, "locks", len(locks))
	}
	return locks, nil
}

// read returns the Locks of namespace ns from a read of the API server
// that starts after the call: a read of its own, or, when
// maxNamespaceReads are in flight, the namespace's pending read. The Locks
// are shared: read-only.
func (f *lockFinder) read(ctx context.Context, ns string) ([]lockv1alpha1.Lock, error) {
	f.mu.Lock()
	reads := f.namespaces[ns]
	if reads == nil {
		reads = &namespaceReads{}
		f.namespaces[ns] = reads
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(confirmTimeout)
	}
	r := reads.pending
	if r == nil {
		r = &namespaceRead{done: make(chan struct{}), deadline: deadline}
		if reads.running < maxNamespaceReads {
			reads.running++
			go f.run(ns, r)
		} else {
			reads.pending = r
		}
	}
	// A pending read lasts as long as the latest of its confirmations may
	// wait; each stops waiting at its own deadline.
	if deadline.After(r.deadline) {
		r.deadline = deadline
	}
	r.waiters++
	f.mu.Unlock()
	select {
	case <-r.done:
		return r.locks, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run performs read r of namespace ns, then starts the pending read.
func (f *lockFinder) run(ns string, r *namespaceRead) {
	ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
	r.locks, r.err = f.list(ctx, ns)
	cancel()
	close(r.done)

	f.mu.Lock()
	defer f.mu.Unlock()
	reads := f.namespaces[ns]
	reads.running--
	if next := reads.pending; next != nil {
		reads.pending = nil // From now on, confirmations wait for another read.
		reads.running++
		go f.run(ns, next)
	}
	if reads.running == 0 {
		delete(f.namespaces, ns)
	}
}

// list reads the live Locks of namespace ns from the API server, in pages
// of confirmPageSize (listLiveLocks, the guards' read).
func (f *lockFinder) list(ctx context.Context, ns string) ([]lockv1alpha1.Lock, error) {
	return listLiveLocks(ctx, f.live, ns)
}
