package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// confirmTimeout bounds the read that confirms an allowed delete, so that
// the webhook answers (fail closed) before the API server's call to it
// times out (timeoutSeconds 5).
const confirmTimeout = 3 * time.Second

// ConfirmedFinder is the webhook's view of Locks: a Finder whose "no Lock"
// answers are confirmed by reading the namespace's Locks from the API
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
type ConfirmedFinder struct {
	cached *Finder
	live   client.Reader

	mu         sync.Mutex
	namespaces map[string]*namespaceReads
}

// maxNamespaceReads bounds the reads of one namespace in flight.
const maxNamespaceReads = 1

// namespaceReads are the reads of one namespace.
type namespaceReads struct {
	running int            // reads in flight
	pending *namespaceRead // the read waiting for a slot, which new confirmations join
}

// namespaceRead is one list of a namespace's Locks from the API server,
// shared by the confirmations that joined it before it started.
type namespaceRead struct {
	waiters int           // confirmations that joined it
	done    chan struct{} // closed when locks and err are set
	locks   []lockv1alpha1.Lock
	err     error
}

// NewConfirmedFinder returns a ConfirmedFinder that answers from cached
// and confirms through live, a reader that reads the API server (the
// manager's APIReader).
func NewConfirmedFinder(cached *Finder, live client.Reader) *ConfirmedFinder {
	return &ConfirmedFinder{cached: cached, live: live, namespaces: map[string]*namespaceReads{}}
}

// FindLocks returns the live Locks in obj's namespace that target the
// group, kind and name of obj: from the cache when it has any, otherwise
// from the API server. It returns an error when the cache has not synced
// or the API server cannot be read.
func (f *ConfirmedFinder) FindLocks(ctx context.Context, gk schema.GroupKind, obj types.NamespacedName) ([]lockv1alpha1.Lock, error) {
	locks, err := f.cached.FindLocks(ctx, gk, obj)
	if err != nil || len(locks) > 0 {
		return locks, err
	}
	all, err := f.read(ctx, obj.Namespace)
	if err != nil {
		return nil, fmt.Errorf("reading the Locks of namespace %s from the API server: %w", obj.Namespace, err)
	}
	want := TargetIndexValue(gk, obj.Name)
	for i := range all {
		if slices.Contains(indexLockTarget(&all[i]), want) {
			locks = append(locks, *all[i].DeepCopy())
		}
	}
	if len(locks) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Lock cache lagged: the API server has Locks the cache has not seen yet", "kind", gk, "namespace", obj.Namespace, "name", obj.Name, "locks", len(locks))
	}
	return locks, nil
}

// read returns the Locks of namespace ns from a read of the API server
// that starts after the call: a read of its own, or, when
// maxNamespaceReads are in flight, the namespace's pending read. The Locks
// are shared: read-only.
func (f *ConfirmedFinder) read(ctx context.Context, ns string) ([]lockv1alpha1.Lock, error) {
	f.mu.Lock()
	reads := f.namespaces[ns]
	if reads == nil {
		reads = &namespaceReads{}
		f.namespaces[ns] = reads
	}
	r := reads.pending
	if r == nil {
		r = &namespaceRead{done: make(chan struct{})}
		if reads.running < maxNamespaceReads {
			reads.running++
			go f.run(ns, r)
		} else {
			reads.pending = r
		}
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
func (f *ConfirmedFinder) run(ns string, r *namespaceRead) {
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	var all lockv1alpha1.LockList
	r.err = f.live.List(ctx, &all, client.InNamespace(ns))
	cancel()
	r.locks = all.Items
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
