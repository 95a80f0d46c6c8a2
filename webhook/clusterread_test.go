package webhook

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"weak"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The cluster guards' reads are bounded by what a decision needs (issue
// 22: a forged CRD-delete review must not copy, or hold, every Lock of the
// cluster): the CRD of a kind reads the Locks of that kind, the Lock CRD
// at most maxNamed+1 Locks.

// countingCache is a Locks over a fixed set of live targetRef Locks that
// counts the copies it hands out (NoLocks answers the lookups of selector
// Locks). It holds its Locks in the order given, as an informer's store
// holds them in no order.
type countingCache struct {
	NoLocks
	locks  []lockv1alpha1.Lock
	copies int
}

// give counts and returns copies of locks.
func (c *countingCache) give(locks []lockv1alpha1.Lock) []lockv1alpha1.Lock {
	out := make([]lockv1alpha1.Lock, 0, len(locks))
	for i := range locks {
		out = append(out, *locks[i].DeepCopy())
	}
	c.copies += len(out)
	return out
}

func (c *countingCache) LiveLocksIn(ns string) ([]lockv1alpha1.Lock, error) {
	var in []lockv1alpha1.Lock
	for _, l := range c.locks {
		if l.Namespace == ns {
			in = append(in, l)
		}
	}
	return c.give(in), nil
}

func (c *countingCache) LiveLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	var in []lockv1alpha1.Lock
	for _, l := range c.locks {
		if key, _ := l.LiveTarget(time.Time{}); key.GroupKind() == gk {
			in = append(in, l)
		}
	}
	return c.give(in), nil
}

func (c *countingCache) AnyLiveLocks(limit int) ([]lockv1alpha1.Lock, int, error) {
	sorted := slices.SortedFunc(slices.Values(c.locks), func(a, b lockv1alpha1.Lock) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return c.give(sorted[:min(limit, len(sorted))]), len(sorted), nil
}

// otherKindLock is the i-th of the live Locks on Stacks, ten per
// namespace: in the order of i, as an API server lists them.
func otherKindLock(i int) lockv1alpha1.Lock {
	return guardLock(fmt.Sprintf("ns%03d", i/10), fmt.Sprintf("stack-%05d", i), "Stack", fmt.Sprintf("s%05d", i), "")
}

// otherKindLocks returns the first n otherKindLocks.
func otherKindLocks(n int) []lockv1alpha1.Lock {
	locks := make([]lockv1alpha1.Lock, 0, n)
	for i := range n {
		locks = append(locks, otherKindLock(i))
	}
	return locks
}

// TestCRDDecisionCopiesOnlyItsKind: the delete of the Widget CRD, in a
// cluster of 1,000 Locks on Stacks and 3 on existing Widgets, copies the 3
// Widget Locks from the cache and none of the others; the delete of the
// Lock CRD copies no more Locks than its message names.
func TestCRDDecisionCopiesOnlyItsKind(t *testing.T) {
	const others = 1000
	widgets := []lockv1alpha1.Lock{
		guardLock("forge", "w1", "Widget", "w1", ""),
		guardLock("edge", "w2", "Widget", "w2", ""),
		guardLock("edge", "gone", "Widget", "absent", ""),
	}
	api := &fakeAPI{objects: map[schema.GroupKind]map[string]map[string]bool{widgetGK: {"forge": {"w1": true}, "edge": {"w2": true}}}}

	cache := &countingCache{locks: append(otherKindLocks(others), widgets...)}
	h := NewHandler(Config{Locks: withCache{cache, noLookup(t)}, Cluster: &ClusterConfig{API: api, Kinds: guardMapper()}})
	got := resultOf(h.Decide(context.Background(), crdRequest(lockv1alpha1.Group, "Widget")))
	if want := "customresourcedefinition is protected by Lock(s) [edge/w2 forge/w1]"; got.Allowed || !strings.HasPrefix(got.Message, want) {
		t.Errorf("Decide(Widget CRD): %+v, want denied with %q", got, want)
	}
	if cache.copies > len(widgets) {
		t.Errorf("Decide(Widget CRD) copied %d Locks from the cache, want at most the %d Widget Locks", cache.copies, len(widgets))
	}

	cache = &countingCache{locks: otherKindLocks(others)}
	h = NewHandler(Config{Locks: withCache{cache, noLookup(t)}, Cluster: &ClusterConfig{API: api, Kinds: guardMapper()}})
	got = resultOf(h.Decide(context.Background(), crdRequest(lockv1alpha1.Group, "Lock")))
	if want := "customresourcedefinition is protected by Lock(s) [ns000/stack-00000 "; got.Allowed || !strings.HasPrefix(got.Message, want) {
		t.Errorf("Decide(Lock CRD): %+v, want denied with %q", got, want)
	}
	if cache.copies > maxNamed+1 {
		t.Errorf("Decide(Lock CRD) copied %d Locks from the cache, want at most %d", cache.copies, maxNamed+1)
	}
}

// pagingAPI is an API server that serves its Locks in pages of pageSize,
// each page freshly built as a decoded list would be, and the targets of
// its fakeAPI. Before each page after the first it collects garbage and
// records how many Locks of an earlier page that keep rejects are still
// reachable: the Locks the decision holds that it did not need.
type pagingAPI struct {
	fakeAPI
	n        int                           // Locks in all
	lock     func(i int) lockv1alpha1.Lock // the i-th Lock, in list order
	keep     func(lockv1alpha1.Lock) bool
	pageSize int

	pages  int                              // Lock pages served
	served []weak.Pointer[metav1.Condition] // of the rejected Locks served so far
	held   int                              // the most of them reachable before a page
}

func (a *pagingAPI) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*lockv1alpha1.LockList)
	if !ok {
		return a.fakeAPI.List(ctx, list, opts...)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	var next int
	if o.Continue != "" {
		fmt.Sscan(o.Continue, &next)
		runtime.GC()
		runtime.GC()
		held := 0
		for _, p := range a.served {
			if p.Value() != nil {
				held++
			}
		}
		a.held = max(a.held, held)
	}
	a.pages++
	end := min(next+a.pageSize, a.n)
	for i := next; i < end; i++ {
		lk := a.lock(i)
		// Each Lock owns its conditions: a copy of the Lock that the
		// decision keeps keeps them reachable.
		lk.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive}}
		lk.Status.Active = true
		if !a.keep(lk) {
			a.served = append(a.served, weak.Make(&lk.Status.Conditions[0]))
		}
		l.Items = append(l.Items, lk)
	}
	if end < a.n {
		l.Continue = fmt.Sprint(end)
	}
	return nil
}

// TestCRDFallbackHoldsOnlyItsKind: listing the Locks from the API server
// (no cache), the delete of the Widget CRD keeps of each page only the
// Widget Locks, so that no more than a page of the 1,000 Locks on Stacks
// is reachable at once; the delete of the Lock CRD stops listing once it
// has more live Locks than its message names.
func TestCRDFallbackHoldsOnlyItsKind(t *testing.T) {
	const others, pageSize = 1000, 10
	objects := map[schema.GroupKind]map[string]map[string]bool{widgetGK: {"zz": {"w1": true}}}
	isWidget := func(l lockv1alpha1.Lock) bool { return l.Spec.TargetRef.Kind == "Widget" }
	api := &pagingAPI{fakeAPI: fakeAPI{objects: objects}, n: others + 1, pageSize: pageSize, keep: isWidget,
		lock: func(i int) lockv1alpha1.Lock {
			if i == others {
				return guardLock("zz", "w1", "Widget", "w1", "")
			}
			return otherKindLock(i)
		}}
	h := NewHandler(Config{Locks: noLookup(t), Cluster: &ClusterConfig{API: api, Kinds: guardMapper()}})
	// The pages collect garbage twice each: a deadline of its own, not
	// the guards' 3 s, so that a loaded machine does not cut the list.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := resultOf(h.Decide(ctx, crdRequest(lockv1alpha1.Group, "Widget")))
	if want := "customresourcedefinition is protected by Lock(s) [zz/w1]"; got.Allowed || !strings.HasPrefix(got.Message, want) {
		t.Errorf("Decide(Widget CRD): %+v, want denied with %q", got, want)
	}
	if api.pages != (others+1+pageSize-1)/pageSize {
		t.Errorf("Decide(Widget CRD) read %d pages of Locks, want all %d", api.pages, (others+1+pageSize-1)/pageSize)
	}
	if api.held > pageSize {
		t.Errorf("Decide(Widget CRD) held up to %d Stack Locks of earlier pages while listing, want at most a page (%d)", api.held, pageSize)
	}

	api = &pagingAPI{fakeAPI: fakeAPI{objects: objects}, n: others, pageSize: pageSize,
		keep: func(lockv1alpha1.Lock) bool { return false },
		lock: func(i int) lockv1alpha1.Lock { return otherKindLock(i) }}
	h = NewHandler(Config{Locks: noLookup(t), Cluster: &ClusterConfig{API: api, Kinds: guardMapper()}})
	got = resultOf(h.Decide(ctx, crdRequest(lockv1alpha1.Group, "Lock")))
	if want := "customresourcedefinition is protected by Lock(s) [ns000/stack-00000 "; got.Allowed || !strings.HasPrefix(got.Message, want) {
		t.Errorf("Decide(Lock CRD): %+v, want denied with %q", got, want)
	}
	// It reads every page, to count the Locks it does not name, and
	// holds at most a page of them.
	if api.held > pageSize {
		t.Errorf("Decide(Lock CRD) held up to %d Locks of earlier pages while listing, want at most a page (%d)", api.held, pageSize)
	}
	if want := fmt.Sprintf("and %d more]", others-maxNamed); !strings.Contains(got.Message, want) {
		t.Errorf("Decide(Lock CRD): %q, want it to count the Locks it does not name (%q)", got.Message, want)
	}
}

// TestLockCRDAuditCountsTheRest: the audit annotation of a Lock CRD denial
// counts the live Locks the guard did not copy, as the message does (it
// names the first maxNamed of 15, and 5 more), from the cache and from the
// API server alike.
func TestLockCRDAuditCountsTheRest(t *testing.T) {
	var locks []lockv1alpha1.Lock
	var first []string
	for i := range 15 {
		locks = append(locks, guardLock("big", fmt.Sprintf("lock-%02d", i), "Stack", "s", ""))
		if i < maxNamed {
			first = append(first, fmt.Sprintf("big/lock-%02d", i))
		}
	}
	for name, tc := range map[string]struct {
		cache Locks
		api   *fakeAPI
		want  string
	}{
		"FromCache": {cache: &countingCache{locks: locks}, api: &fakeAPI{}, want: strings.Join(first, ",") + ",and 5 more"},
		"FromAPI":   {cache: NoLocks{}, api: &fakeAPI{locks: locks}, want: strings.Join(first, ",") + ",and 5 more"},
	} {
		t.Run(name, func(t *testing.T) {
			h := NewHandler(Config{Locks: withCache{tc.cache, noLookup(t)}, Cluster: &ClusterConfig{API: tc.api, Kinds: guardMapper()}})
			resp := h.Decide(context.Background(), crdRequest(lockv1alpha1.Group, "Lock"))
			if got := resp.AuditAnnotations[AuditLocks]; resp.Allowed || got != tc.want {
				t.Errorf("Decide(Lock CRD): allowed %v, audit %s=%q; want denied, %q", resp.Allowed, AuditLocks, got, tc.want)
			}
		})
	}
}

// endlessAPI serves pages of Locks on Stacks without end, ignoring the
// context it is given.
type endlessAPI struct{ fakeAPI }

func (a *endlessAPI) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*lockv1alpha1.LockList)
	if !ok {
		return a.fakeAPI.List(ctx, list, opts...)
	}
	l.Items, l.Continue = otherKindLocks(10), "more"
	return nil
}

// TestCRDFallbackEndsWithItsDeadline: the list of Locks from the API
// server stops between pages when the decision's context ends, even from a
// reader that does not heed it, and the delete is refused.
func TestCRDFallbackEndsWithItsDeadline(t *testing.T) {
	h := NewHandler(Config{Locks: noLookup(t), Cluster: &ClusterConfig{API: &endlessAPI{}, Kinds: guardMapper()}})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- resultOf(h.Decide(ctx, crdRequest(lockv1alpha1.Group, "Widget"))) }()
	select {
	case got := <-done:
		if got.Allowed || got.Code != http.StatusServiceUnavailable || !strings.HasSuffix(got.Message, "listing Locks from the API server: context deadline exceeded") {
			t.Errorf("Decide(Widget CRD) past its deadline: %+v, want ServiceUnavailable for the deadline", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Decide(Widget CRD) still listing 10 s after its deadline")
	}
}
