package controller

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	"github.com/navique/lockguard/internal/cachestore"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

// recordedEvents records what a handler saw, by object name.
type recordedEvents struct {
	mu               sync.Mutex
	initial, added   map[string]int
	updated, deleted map[string]int
	// early counts the adds of the initial list seen before returned is
	// set, each taking slow.
	early    int
	returned atomic.Bool
	slow     time.Duration
}

func newRecordedEvents() *recordedEvents {
	return &recordedEvents{initial: map[string]int{}, added: map[string]int{}, updated: map[string]int{}, deleted: map[string]int{}}
}

func (r *recordedEvents) OnAdd(obj any, initial bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if initial {
		time.Sleep(r.slow)
		if !r.returned.Load() {
			r.early++
		}
		r.initial[obj.(*metav1.PartialObjectMetadata).Name]++
	} else {
		r.added[obj.(*metav1.PartialObjectMetadata).Name]++
	}
}

func (r *recordedEvents) OnUpdate(_, obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.updated[obj.(*metav1.PartialObjectMetadata).Name]++
}

func (r *recordedEvents) OnDelete(obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deleted[obj.(*metav1.PartialObjectMetadata).Name]++
}

func (r *recordedEvents) snapshot() [4]map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := func(m map[string]int) map[string]int {
		out := map[string]int{}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	return [4]map[string]int{c(r.initial), c(r.added), c(r.updated), c(r.deleted)}
}

// listedInformer is an informer of n metadata objects o-0 to o-<n-1>,
// as lockguard's cache's are (a cachestore.Informer), and the source its
// test drives; started unless not.
func listedInformer(t *testing.T, n int) (toolscache.SharedIndexInformer, *fcache.FakeControllerSource, func()) {
	t.Helper()
	src := fakeSource(n)
	t.Cleanup(src.Shutdown)
	inf := pagedInformer(src)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return inf, src, func() { go inf.RunWithContext(ctx) }
}

// fakeSource is a source of n metadata objects o-0 to o-<n-1>.
func fakeSource(n int) *fcache.FakeControllerSource {
	src := fcache.NewFakeControllerSource()
	for i := range n {
		src.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("o-%d", i)}})
	}
	return src
}

// pagedInformer is a cachestore.Informer of src's objects that lists them
// (the fake source does not stream).
func pagedInformer(src *fcache.FakeControllerSource) *cachestore.Informer {
	inf := cachestore.NewInformer(src, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
	if err := inf.SetPaging(cachestore.InformerPageSize, false); err != nil {
		panic(err)
	}
	return inf
}

// TestConvertingInformerAdds: a handler added through convertingInformer
// sees every stored object once as an add of the initial list, whether
// the informer had synced (it is told of them before its add returns) or
// had not started (it is told of them as they are listed), and what
// changes after as it happens; once removed, nothing more. With drops, the adds it
// reports are neither converted nor delivered, on either path; updates and
// deletes of those objects still are.
func TestConvertingInformerAdds(t *testing.T) {
	const n = 500
	for _, tc := range []struct{ synced, dropping bool }{{true, false}, {false, false}, {true, true}, {false, true}} {
		synced := tc.synced
		t.Run(fmt.Sprintf("synced=%v,dropping=%v", synced, tc.dropping), func(t *testing.T) {
			inf, src, run := listedInformer(t, n)
			if synced {
				run()
				if !toolscache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
					t.Fatal("the informer did not sync")
				}
			}
			rec := newRecordedEvents()
			// Slower than client-go hands them over: its adds would wait
			// in the buffer.
			rec.slow = 50 * time.Microsecond
			converted := 0
			var mu sync.Mutex
			i := convertingInformer{Informer: inf, convert: func(o any) any {
				mu.Lock()
				converted++
				mu.Unlock()
				return o
			}}
			// Drops the adds of the stored objects of even index.
			dropped := func(j int) bool { return tc.dropping && j%2 == 0 }
			if tc.dropping {
				i.drops = func(o any) bool {
					var j int
					_, err := fmt.Sscanf(o.(metav1.Object).GetName(), "o-%d", &j)
					return err == nil && dropped(j)
				}
			}
			delivered := 0
			for j := range n {
				if !dropped(j) {
					delivered++
				}
			}
			reg, err := i.AddEventHandler(rec)
			rec.returned.Store(true)
			if err != nil {
				t.Fatal(err)
			}
			if synced {
				rec.mu.Lock()
				early := rec.early
				rec.mu.Unlock()
				if early != delivered {
					t.Errorf("%d of the %d stored objects reached the handler before AddEventHandler returned, want all %d not dropped", early, n, delivered)
				}
			}
			if !synced {
				run()
			}
			if !toolscache.WaitForCacheSync(t.Context().Done(), reg.HasSynced) {
				t.Fatal("the handler did not sync")
			}
			src.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "new"}})
			src.Modify(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o-1"}})
			src.Delete(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "o-2"}})
			want := [4]map[string]int{{}, {"new": 1}, {"o-1": 1}, {"o-2": 1}}
			for j := range n {
				if !dropped(j) {
					want[0][fmt.Sprintf("o-%d", j)] = 1
				}
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				got := rec.snapshot()
				diff := cmp.Diff(want, got)
				if diff == "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("events seen (-want +got):\n%s", diff)
				}
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			// One conversion per object delivered (an update converts
			// both).
			if want := delivered + 1 + 2 + 1; converted != want {
				t.Errorf("converted %d objects, want %d", converted, want)
			}
			mu.Unlock()
			if err := i.RemoveEventHandler(reg); err != nil {
				t.Fatal(err)
			}
			// A witness added after the removal: once it has seen the
			// next add, the removed handler would have too.
			witness := newRecordedEvents()
			if _, err := i.AddEventHandler(witness); err != nil {
				t.Fatal(err)
			}
			src.Add(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "late"}})
			for witness.snapshot()[1]["late"] == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the witness never saw the add of late")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if got := rec.snapshot(); got[1]["late"] != 0 {
				t.Errorf("a removed handler saw the add of %q", "late")
			}
		})
	}
}

// nopHandler takes every event and does nothing.
type nopHandler struct{}

func (nopHandler) OnAdd(any, bool)   {}
func (nopHandler) OnUpdate(any, any) {}
func (nopHandler) OnDelete(any)      {}

// BenchmarkHandlerBuffer reports the live heap per object of an informer
// of 200,000 with a handler that takes every event at once, and what
// adding the handler left (issue 38: client-go's notification buffer, 20
// MB at a million objects in the scale runs' heap profiles), for
// client-go's informer and for lockguard's (cachestore.Informer, whose
// handlers have no buffer): with no handler, for comparison; added before
// the informer runs (told of the initial list as it is listed); and added
// to the synced informer (told of the stored objects):
//
//	go test -run '^$' -bench HandlerBuffer -benchtime 1x ./controller/
func BenchmarkHandlerBuffer(b *testing.B) {
	const n = 200000
	for _, informer := range []string{"client-go", "cachestore"} {
		for _, mode := range []string{"none", "before-run", "after-sync"} {
			b.Run(informer+"/"+mode, func(b *testing.B) {
				for range b.N {
					src := fakeSource(n)
					var inf toolscache.SharedIndexInformer
					if informer == "client-go" {
						inf = toolscache.NewSharedIndexInformer(src, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
					} else {
						inf = pagedInformer(src)
					}
					ctx, cancel := context.WithCancel(context.Background())
					add := func() {
						if _, err := (convertingInformer{Informer: inf, convert: func(o any) any { return o }}).AddEventHandler(nopHandler{}); err != nil {
							b.Fatal(err)
						}
					}
					start := readmodeltest.LiveHeap()
					if mode == "before-run" {
						add()
					}
					go inf.RunWithContext(ctx)
					if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
						b.Fatal("the informer did not sync")
					}
					time.Sleep(time.Second)
					synced := readmodeltest.LiveHeap()
					if mode == "after-sync" {
						add()
						time.Sleep(2 * time.Second)
					}
					end := readmodeltest.LiveHeap()
					b.ReportMetric(float64(int64(end)-int64(start))/n, "B/object")
					b.ReportMetric(float64(int64(end)-int64(synced))/n, "B/object-added")
					cancel()
					src.Shutdown()
				}
			})
		}
	}
}

// TestDropsOf: the sources of the target kinds drop, before converting
// them, the adds their handler would drop (objectEvents.dropsAdd); the
// Lock source and a handler without dropsAdd drop none.
func TestDropsOf(t *testing.T) {
	if dropsOf(objectEvents{}) == nil {
		t.Error("objectEvents' source converts every add")
	}
	if dropsOf(lockEvents{}) != nil {
		t.Error("lockEvents' source drops adds")
	}
	if dropsOf(nopHandler{}) != nil {
		t.Error("a handler without dropsAdd has its adds dropped")
	}
}
