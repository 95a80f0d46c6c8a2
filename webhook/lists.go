package webhook

import (
	"context"
	"fmt"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// LockLister reads Locks from the API server (in lockguard, the manager's
// APIReader): a LockList of one namespace, with client.InNamespace.
type LockLister interface {
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// confirmTimeout bounds a read of a namespace's Locks when the context of
// the decision has no deadline (ServeHTTP gives it the review's timeout
// less a margin; Handle's caller may give none).
const confirmTimeout = 3 * time.Second

// listPageSize is how many Locks one page of a list from the API server
// holds: a namespace with many Locks is read in pages, so that neither the
// API server nor lockguard builds one response of all of them. The pages
// of one list are one snapshot: the API server serves every page after the
// first at the first page's resourceVersion (from etcd, or on 1.34 and
// later from a snapshot of its watch cache), and the first is a consistent
// read, like an unpaginated list. A page it can no longer serve (410
// Expired after a compaction) fails the read: fail closed.
const listPageSize = 500

// confirmPageSize is the page size of the reads of a namespace's Locks.
const confirmPageSize = listPageSize

// maxNamespaceReads bounds the reads of one namespace in flight.
const maxNamespaceReads = 1

// apiLists reads live Locks from the API server, page by page.
//
// The reads of one namespace are shared when there are many: a namespace
// has at most maxNamespaceReads reads in flight; decisions that need one
// beyond that wait together for the next read, which starts as soon as
// one in flight ends. Every decision is thus answered by a read that
// started after it asked, and a burst of deletes (a garbage collector
// cascade, say) costs a few reads rather than one each.
type apiLists struct {
	api LockLister
	now func() time.Time // Locks are live by it (Lock.Live)

	mu         sync.Mutex
	namespaces map[string]*namespaceReads
}

// namespaceReads are the reads of one namespace.
type namespaceReads struct {
	running int            // reads in flight
	pending *namespaceRead // the read waiting for a slot, which new decisions join
}

// namespaceRead is one list of a namespace's Locks from the API server,
// shared by the decisions that joined it before it started.
type namespaceRead struct {
	waiters  int           // decisions that joined it
	deadline time.Time     // the latest of theirs: the read's own
	done     chan struct{} // closed when locks and err are set
	locks    []lockv1alpha1.Lock
	err      error
}

func newAPILists(api LockLister, now func() time.Time) *apiLists {
	return &apiLists{api: api, now: now, namespaces: map[string]*namespaceReads{}}
}

// namespace returns the live Locks of namespace ns from a read of the API
// server that starts after the call: a read of its own, or, when
// maxNamespaceReads are in flight, the namespace's pending read. The Locks
// are shared: read-only.
func (l *apiLists) namespace(ctx context.Context, ns string) ([]lockv1alpha1.Lock, error) {
	l.mu.Lock()
	reads := l.namespaces[ns]
	if reads == nil {
		reads = &namespaceReads{}
		l.namespaces[ns] = reads
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
			go l.run(ns, r)
		} else {
			reads.pending = r
		}
	}
	// A pending read lasts as long as the latest of its decisions may
	// wait; each stops waiting at its own deadline.
	if deadline.After(r.deadline) {
		r.deadline = deadline
	}
	r.waiters++
	l.mu.Unlock()
	select {
	case <-r.done:
		return r.locks, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("listing Locks from the API server: %w", ctx.Err())
	}
}

// run performs read r of namespace ns, then starts the pending read.
func (l *apiLists) run(ns string, r *namespaceRead) {
	ctx, cancel := context.WithDeadline(context.Background(), r.deadline)
	r.locks, _, r.err = l.list(ctx, ns, nil, 0)
	cancel()
	close(r.done)

	l.mu.Lock()
	defer l.mu.Unlock()
	reads := l.namespaces[ns]
	reads.running--
	if next := reads.pending; next != nil {
		reads.pending = nil // From now on, decisions wait for another read.
		reads.running++
		go l.run(ns, next)
	}
	if reads.running == 0 {
		delete(l.namespaces, ns)
	}
}

// list returns the live Locks of namespace ns, or of every namespace when
// ns is "", that keep accepts (every live Lock when keep is nil), read page
// by page: of each page it keeps only those, so that a decision that needs
// some Locks of the cluster never holds them all. With limit > 0 it keeps
// the first limit of them (in the API server's order, by namespace and
// name) and counts the rest in more. It stops with ctx's error once ctx
// ends, between pages too.
func (l *apiLists) list(ctx context.Context, ns string, keep func(*lockv1alpha1.Lock) bool, limit int) (live []lockv1alpha1.Lock, more int, err error) {
	opts := []client.ListOption{client.Limit(listPageSize)}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	cont := ""
	for {
		if err := ctx.Err(); err != nil {
			return nil, 0, fmt.Errorf("listing Locks from the API server: %w", err)
		}
		var page lockv1alpha1.LockList
		if err := l.api.List(ctx, &page, append(opts, client.Continue(cont))...); err != nil {
			return nil, 0, fmt.Errorf("listing Locks from the API server: %w", err)
		}
		now := l.now()
		for i := range page.Items {
			lk := &page.Items[i]
			if !lk.Live(now) || keep != nil && !keep(lk) {
				continue
			}
			if limit > 0 && len(live) >= limit {
				more++
				continue
			}
			live = append(live, *lk)
		}
		if cont = page.Continue; cont == "" {
			return live, more, nil
		}
	}
}
