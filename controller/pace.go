package controller

import (
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// startWindow is how many items of the informers' initial lists the work
// queue holds ready at once (pacedQueue).
const startWindow = 1000

// backlogChunk is how many passes a chunk of a pacedQueue's backlog holds.
const backlogChunk = 4096

// pacedQueue is the reconciler's work queue: controller-runtime's priority
// queue, fed the passes of the informers' initial lists (enqueue) no
// more than startWindow at a time, from a backlog of its own, as the
// workers take them. Issue 38: the priority queue and its metrics keep
// an item's entry in maps that never shrink, so a start that enqueued
// every Lock and target at once held them at that size for good (14 MB
// at 100,000 Locks, benchmarks.md section 9, run S). Each pass still runs
// once, in the order the lists gave it; other events' passes do not wait
// behind the backlog. An item both in the backlog and added again runs
// twice, which a pass allows (it writes only what differs).
//
// The backlog holds each pass as its request's strings (pending), in
// chunks dropped as they are fed, and makes its item (unique.Make) only
// as it feeds it: an item of the backlog was a copy of the request and
// its strings in unique's map, about 250 bytes a pass (32 MB of the
// start's peak heap at 100,000 Locks and a million objects, run AC). A
// namespace's or a Lock's pass still in the backlog is not added again:
// each Lock of the initial list asks for its namespace's, and each object
// for the selector Locks that cover it, a pass that, run after them all,
// sees them all (a selector Lock's pass reads every object of its
// namespace: one per covered object would cost the square of them).
type pacedQueue struct {
	priorityqueue.PriorityQueue[item]
	window int

	mu sync.Mutex
	// backlog is fed from backlog[0][head] on; every chunk but the last
	// is full.
	backlog [][]pending
	head    int
	// added and fed count the passes the backlog took and fed since it
	// was last empty.
	added, fed int
	// waiting is where (added, before it) each namespace's and Lock's
	// pass went into the backlog.
	waiting map[nsName]int
	// kinds are the targets' groups and kinds the backlog's passes share.
	kinds map[groupKind]*groupKind
}

var _ priorityqueue.PriorityQueue[item] = (*pacedQueue)(nil)

// newPacedQueue is the controller's NewQueue: a pacedQueue over a priority
// queue as controller-runtime builds it (its metrics named after the
// controller, rl its rate limiter).
func newPacedQueue(log logr.Logger) func(string, workqueue.TypedRateLimiter[item]) workqueue.TypedRateLimitingInterface[item] {
	return func(name string, rl workqueue.TypedRateLimiter[item]) workqueue.TypedRateLimitingInterface[item] {
		return &pacedQueue{window: startWindow, PriorityQueue: priorityqueue.New(name, func(o *priorityqueue.Opts[item]) {
			o.Log = log.WithValues("controller", name)
			o.RateLimiter = rl
		})}
	}
}

// pending is a request as a pacedQueue's backlog holds it (40 bytes; a
// request is 112): a target's pass {namespace, name, its group and kind},
// a Lock's {namespace, name, nil}, a namespace's {namespace, "", nil}.
// The passes of one kind share its group and kind (pacedQueue.kinds):
// four strings, 64 bytes, before (issue 38, benchmarks.md section 9, run
// AO: the backlog held 15-21 MB of the start's peak at 100,000 Locks and
// a million objects).
type pending struct {
	nsName
	kind *groupKind
}

// nsName is a namespace and a name: a Lock's or a namespace's pass as
// pacedQueue.waiting keys it.
type nsName struct{ namespace, name string }

// groupKind is a target's group and kind.
type groupKind struct{ group, kind string }

// pendingOf returns r as the backlog holds it, and whether it holds it
// so (request gives r back: a request sets one of Target, Lock and
// Namespace); q.mu is held.
func (q *pacedQueue) pendingOf(r request) (pending, bool) {
	var p pending
	switch t := r.Target; {
	case r.Namespace != "":
		p = pending{nsName: nsName{namespace: r.Namespace}}
	case r.Lock.Name != "":
		p = pending{nsName: nsName{namespace: r.Lock.Namespace, name: r.Lock.Name}}
	default:
		gk := groupKind{group: t.Group, kind: t.Kind}
		shared, ok := q.kinds[gk]
		if !ok {
			if q.kinds == nil {
				q.kinds = map[groupKind]*groupKind{}
			}
			shared = &gk
			q.kinds[gk] = shared
		}
		p = pending{nsName: nsName{namespace: t.Namespace, name: t.Name}, kind: shared}
	}
	return p, p.request() == r
}

// request returns the request p holds.
func (p pending) request() request {
	switch {
	case p.kind != nil:
		return request{Target: lockv1alpha1.TargetKey{Namespace: p.namespace, Group: p.kind.group, Kind: p.kind.kind, Name: p.name}}
	case p.name != "":
		return request{Lock: types.NamespacedName{Namespace: p.namespace, Name: p.name}}
	}
	return request{Namespace: p.namespace}
}

// enqueue adds the passes of reqs to q: paced (pacedQueue) when they are
// the passes of an initial list's object (initial) and q is a pacedQueue,
// at once otherwise.
func enqueue(q workqueue.TypedRateLimitingInterface[item], initial bool, reqs ...request) {
	if p, ok := q.(*pacedQueue); ok && initial {
		for _, r := range p.push(reqs) {
			q.Add(itemOf(r))
		}
		p.feed()
		return
	}
	for _, r := range reqs {
		q.Add(itemOf(r))
	}
}

// push adds reqs to the backlog, but a namespace's or a Lock's pass that
// it holds already, and returns those it cannot hold (pendingOf), to be
// added at once.
func (q *pacedQueue) push(reqs []request) (now []request) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, r := range reqs {
		p, ok := q.pendingOf(r)
		if !ok {
			now = append(now, r)
			continue
		}
		if p.kind == nil {
			if at, ok := q.waiting[p.nsName]; ok && at >= q.fed {
				continue
			}
			if q.waiting == nil {
				q.waiting = map[nsName]int{}
			}
			q.waiting[p.nsName] = q.added
		}
		if n := len(q.backlog); n == 0 || len(q.backlog[n-1]) == backlogChunk {
			q.backlog = append(q.backlog, make([]pending, 0, backlogChunk))
		}
		last := &q.backlog[len(q.backlog)-1]
		*last = append(*last, p)
		q.added++
	}
	return now
}

// feed moves passes of the backlog into the queue while it holds fewer
// than window ready, dropping each chunk once fed, and the backlog once
// empty.
func (q *pacedQueue) feed() {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(q.window-q.PriorityQueue.Len(), q.added-q.fed)
	if n <= 0 {
		return
	}
	items := make([]item, 0, n)
	for range n {
		chunk := q.backlog[0]
		items = append(items, itemOf(chunk[q.head].request()))
		chunk[q.head] = pending{}
		q.head++
		q.fed++
		if q.head == len(chunk) && len(q.backlog) > 1 {
			q.backlog[0] = nil
			q.backlog, q.head = q.backlog[1:], 0
		}
	}
	if q.fed == q.added {
		q.dropLocked()
	}
	q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{}, items...)
}

// Get feeds the queue, then takes its next item.
func (q *pacedQueue) Get() (item, bool) {
	q.feed()
	return q.PriorityQueue.Get()
}

// GetWithPriority feeds the queue, then takes its next item.
func (q *pacedQueue) GetWithPriority() (item, int, bool) {
	q.feed()
	return q.PriorityQueue.GetWithPriority()
}

// Len is the number of items ready, with the backlog's.
func (q *pacedQueue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.PriorityQueue.Len() + q.added - q.fed
}

// ShutDown drops the backlog and shuts the queue down.
func (q *pacedQueue) ShutDown() {
	q.drop()
	q.PriorityQueue.ShutDown()
}

// ShutDownWithDrain drops the backlog and shuts the queue down once the
// items taken are done.
func (q *pacedQueue) ShutDownWithDrain() {
	q.drop()
	q.PriorityQueue.ShutDownWithDrain()
}

func (q *pacedQueue) drop() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dropLocked()
}

// dropLocked empties the backlog; q.mu is held.
func (q *pacedQueue) dropLocked() {
	q.backlog, q.head, q.added, q.fed, q.waiting, q.kinds = nil, 0, 0, 0, nil, nil
}
