package controller

import (
	"slices"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
)

// startWindow is how many items of the informers' initial lists the work
// queue holds ready at once (pacedQueue).
const startWindow = 1000

// pacedQueue is the reconciler's work queue: controller-runtime's priority
// queue, fed the passes of the informers' initial lists (enqueue) no
// more than startWindow at a time, from a backlog of its own, as the
// workers take them. Issue 38: the priority queue and its metrics keep
// an item's entry in maps that never shrink, so a start that enqueued
// every Lock and target at once held them at that size for good (14 MB
// at 100,000 Locks, benchmarks.md section 9, run S); the backlog is a
// slice, dropped once fed. Each pass still runs once, in the order the
// lists gave it; other events' passes do not wait behind the backlog.
// An item both in the backlog and added again runs twice, which a pass
// allows (it writes only what differs).
type pacedQueue struct {
	priorityqueue.PriorityQueue[item]
	window int

	mu      sync.Mutex
	backlog []item // fed from head on
	head    int
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

// enqueue adds items to q: paced (pacedQueue) when they are the passes of
// an initial list's object (initial) and q is a pacedQueue, at once
// otherwise.
func enqueue(q workqueue.TypedRateLimitingInterface[item], initial bool, items ...item) {
	if p, ok := q.(*pacedQueue); ok && initial {
		p.mu.Lock()
		p.backlog = append(p.backlog, items...)
		p.mu.Unlock()
		p.feed()
		return
	}
	for _, it := range items {
		q.Add(it)
	}
}

// feed moves items of the backlog into the queue while it holds fewer than
// window ready, and drops the backlog once it is empty.
func (q *pacedQueue) feed() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.backlog) {
		return
	}
	n := q.window - q.PriorityQueue.Len()
	if n <= 0 {
		return
	}
	end := min(len(q.backlog), q.head+n)
	// A copy: the priority queue keeps what it is given in its add
	// buffer a while, and the backlog's array must not be held by it.
	// The items fed are cleared from the backlog at once.
	q.PriorityQueue.AddWithOpts(priorityqueue.AddOpts{}, slices.Clone(q.backlog[q.head:end])...)
	clear(q.backlog[q.head:end])
	if q.head = end; q.head == len(q.backlog) {
		q.backlog, q.head = nil, 0
	}
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
	return q.PriorityQueue.Len() + len(q.backlog) - q.head
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
	q.backlog, q.head = nil, 0
}
