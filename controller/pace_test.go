package controller

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

func newTestPacedQueue(t *testing.T, window int) *pacedQueue {
	t.Helper()
	q := newPacedQueue(logr.Discard())("paced-test", workqueue.DefaultTypedControllerRateLimiter[item]()).(*pacedQueue)
	q.window = window
	return q
}

// pacedItems returns n requests, of each kind in turn: a target's, a
// Lock's, a namespace's.
func pacedItems(from, n int) []request {
	reqs := make([]request, n)
	for i := range reqs {
		name := fmt.Sprint(from + i)
		switch i % 3 {
		case 0:
			reqs[i] = request{Target: lockv1alpha1.TargetKey{Namespace: "ns", Group: lockv1alpha1.Group, Kind: "Stack", Name: name}}
		case 1:
			reqs[i] = request{Lock: types.NamespacedName{Namespace: "ns", Name: name}}
		default:
			reqs[i] = request{Namespace: name}
		}
	}
	return reqs
}

// TestPacedQueue: the passes of initial lists, added while four workers
// wait on an empty queue, each run once, with never more than the window
// ready in the priority queue; the backlog is dropped once fed.
func TestPacedQueue(t *testing.T) {
	const window, n = 50, 5000
	q := newTestPacedQueue(t, window)
	var (
		mu       sync.Mutex
		seen     = map[request]int{}
		overfull int
		done     sync.WaitGroup
	)
	for range 4 {
		done.Go(func() {
			for {
				it, _, shutdown := q.GetWithPriority()
				if shutdown {
					return
				}
				mu.Lock()
				seen[it.Value()]++
				if q.PriorityQueue.Len() > window {
					overfull++
				}
				total := len(seen)
				mu.Unlock()
				q.Done(it)
				if total == n {
					q.ShutDown()
				}
			}
		})
	}
	items := pacedItems(0, n)
	for chunk := range slices.Chunk(items, 7) {
		enqueue(q, true, chunk...)
	}
	done.Wait()
	for _, r := range items {
		if seen[r] != 1 {
			t.Fatalf("item %v ran %d times, want once", r, seen[r])
		}
	}
	if overfull > 0 {
		t.Errorf("the priority queue held more than %d items ready %d times", window, overfull)
	}
	if q.backlog != nil {
		t.Errorf("the backlog is kept after it was fed: %d chunks", len(q.backlog))
	}
}

// TestPacedQueueOrder: one worker takes the backlog in the order it was
// added, and an item added otherwise (an event after the start) does not
// wait behind the backlog; Len counts the backlog.
func TestPacedQueueOrder(t *testing.T) {
	const window = 10
	q := newTestPacedQueue(t, window)
	defer q.ShutDown()
	items := pacedItems(0, 100)
	enqueue(q, true, items...)
	if got := q.Len(); got != 100 {
		t.Errorf("Len with 100 items added: %d", got)
	}
	// What was fed is not kept by the backlog: without this, and the
	// copy feed gives the priority queue, scale runs (V, W) found the
	// handles of 100,000 items that had run alive, 24 MB of unique's map.
	q.mu.Lock()
	if q.head != window || q.fed != window || slices.ContainsFunc(q.backlog[0][:q.head], func(p pending) bool { return p != pending{} }) {
		t.Errorf("after feeding %d: head %d, fed %d, the fed part of the backlog not cleared", window, q.head, q.fed)
	}
	q.mu.Unlock()
	late := itemOf(request{Namespace: "late"})
	q.Add(late)
	var got []request
	for range 101 {
		it, _ := q.Get()
		q.Done(it)
		got = append(got, it.Value())
	}
	if i := slices.Index(got, late.Value()); i < 0 || i > window {
		t.Errorf("the item added after the backlog ran %dth, want within the first %d", i+1, window+1)
	}
	if diff := slices.DeleteFunc(slices.Clone(got), func(r request) bool { return r == late.Value() }); !slices.Equal(diff, items) {
		t.Errorf("the backlog ran out of order")
	}
	if q.Len() != 0 || q.backlog != nil || q.waiting != nil {
		t.Errorf("after every item: Len %d, backlog %d chunks, %d waiting", q.Len(), len(q.backlog), len(q.waiting))
	}
}

// TestPacedQueueNamespaces: a namespace's or a Lock's pass added while
// one for it waits in the backlog is not added again (it runs after
// both's Locks or objects); one added once the first was fed is; a
// target's always is.
func TestPacedQueueNamespaces(t *testing.T) {
	q := newTestPacedQueue(t, 1)
	defer q.ShutDown()
	target := func(name string) request {
		return request{Target: lockv1alpha1.TargetKey{Namespace: "a", Group: lockv1alpha1.Group, Kind: "Stack", Name: name}}
	}
	// The first is fed at once (the window is empty), so the second is
	// added; the third waits behind it.
	lock := request{Lock: types.NamespacedName{Namespace: "a", Name: "l"}}
	enqueue(q, true, request{Namespace: "a"})
	enqueue(q, true, target("1"), request{Namespace: "a"}, lock, target("2"), request{Namespace: "a"}, lock, target("1"), request{Namespace: "b"})
	want := []request{{Namespace: "a"}, target("1"), {Namespace: "a"}, lock, target("2"), target("1"), {Namespace: "b"}}
	var got []request
	for q.Len() > 0 {
		it, _ := q.Get()
		q.Done(it)
		got = append(got, it.Value())
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("passes run (-want +got):\n%s", diff)
	}
}

// TestPending: the backlog holds each kind of request as it is, the
// targets of one kind sharing it, and a request it cannot hold so (one
// that sets both a namespace and a target) is added at once, not lost.
func TestPending(t *testing.T) {
	q := newTestPacedQueue(t, 1)
	defer q.ShutDown()
	var kinds []*groupKind
	for _, r := range pacedItems(0, 9) {
		p, ok := q.pendingOf(r)
		if !ok || p.request() != r {
			t.Errorf("pendingOf(%+v) = %+v, %t", r, p, ok)
		}
		if p.kind != nil {
			kinds = append(kinds, p.kind)
		}
	}
	if distinct := len(slices.Compact(slices.Clone(kinds))); len(kinds) != 3 || distinct != 1 {
		t.Errorf("the %d targets' passes hold %d groups and kinds, want 3 sharing one", len(kinds), distinct)
	}
	odd := request{Namespace: "a", Target: lockv1alpha1.TargetKey{Namespace: "a", Group: "g", Kind: "K", Name: "x"}}
	if _, ok := q.pendingOf(odd); ok {
		t.Errorf("the backlog would hold %+v as another request", odd)
	}
	enqueue(q, true, request{Namespace: "a"}, odd)
	var got []request
	for q.Len() > 0 {
		it, _ := q.Get()
		q.Done(it)
		got = append(got, it.Value())
	}
	if !slices.Contains(got, odd) || len(got) != 2 {
		t.Errorf("passes run: %+v, want the namespace's and %+v", got, odd)
	}
}

// TestNamespaceEventsPaced: a namespace's create of the initial list
// enqueues its pass, its live Locks' targets and its live selector Locks
// through the paced backlog (never more than the window ready at once);
// a later event's enter the queue at once. Both enqueue the same passes.
func TestNamespaceEventsPaced(t *testing.T) {
	now := time.Now()
	locks := []lockv1alpha1.Lock{
		*newLock("forge", "a", "core.navique.com/v1alpha1", "Stack", "web"),
		*newLock("forge", "b", "core.navique.com/v1alpha1", "Stack", "db"),
		{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "tier", UID: "uid-tier"},
			Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "web"}}}},
		*newLock("other", "c", "core.navique.com/v1alpha1", "Stack", "web"),
	}
	for i := range locks {
		locks[i].Generation = 1
	}
	h := namespaceEvents{readmodeltest.Index(t, func() time.Time { return now }, locks...)}
	ns := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge"}}
	stack := func(name string) request {
		return request{Target: lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: name}}
	}
	want := []request{{Namespace: "forge"}, {Lock: types.NamespacedName{Namespace: "forge", Name: "tier"}}, stack("db"), stack("web")}
	sorted := func(reqs []request) []request {
		return slices.SortedFunc(slices.Values(reqs), func(a, b request) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	}
	for _, initial := range []bool{true, false} {
		q := newTestPacedQueue(t, 1)
		h.Create(t.Context(), event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: ns, IsInInitialList: initial}, q)
		ready := q.PriorityQueue.Len()
		if initial && ready > 1 {
			t.Errorf("a namespace of the initial list put %d passes in the queue at once, want at most the window (1)", ready)
		}
		if !initial && ready != len(want) {
			t.Errorf("a namespace created later put %d passes in the queue at once, want all %d", ready, len(want))
		}
		var got []request
		for q.Len() > 0 {
			it, _ := q.Get()
			q.Done(it)
			got = append(got, it.Value())
		}
		if diff := cmp.Diff(sorted(want), sorted(got)); diff != "" {
			t.Errorf("initial %t: passes (-want +got):\n%s", initial, diff)
		}
		q.ShutDown()
	}
}

// BenchmarkBacklogHeap reports the live heap a pacedQueue's backlog holds
// per pass at the start of 100,000 Locks in 1,000 namespaces (benchmarks.md
// section 9): a target's pass for each Lock, a Lock's for each selector
// Lock (half of them) and a namespace's for each Lock (once a namespace),
// all held in the backlog (a window of 1):
//
//	go test -run '^$' -bench BacklogHeap -benchtime 3x ./controller/
func BenchmarkBacklogHeap(b *testing.B) {
	const locks, namespaces = 100_000, 1_000
	reqs := make([]request, 0, 2*locks)
	for i := range locks {
		ns := fmt.Sprintf("ns-%d", i%namespaces)
		reqs = append(reqs, request{Target: lockv1alpha1.TargetKey{Namespace: ns, Group: lockv1alpha1.Group, Kind: "Stack", Name: fmt.Sprintf("t-%d", i)}}, request{Namespace: ns})
		if i%2 == 1 {
			reqs = append(reqs, request{Lock: types.NamespacedName{Namespace: ns, Name: fmt.Sprintf("l-%d", i)}})
		}
	}
	var sum float64
	for range b.N {
		q := newPacedQueue(logr.Discard())("paced-bench", workqueue.DefaultTypedControllerRateLimiter[item]()).(*pacedQueue)
		q.window = 1
		before := readmodeltest.LiveHeap()
		for _, r := range reqs {
			enqueue(q, true, r)
		}
		after := readmodeltest.LiveHeap()
		if q.Len() != locks+locks/2+namespaces {
			b.Fatalf("the queue holds %d passes, want %d", q.Len(), locks+locks/2+namespaces)
		}
		sum += float64(int64(after)-int64(before)) / float64(q.Len())
		q.ShutDown()
	}
	b.ReportMetric(sum/float64(b.N), "B/pass")
}
