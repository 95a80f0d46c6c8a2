package cachestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// recorder keeps what a handler of an Informer was told, as client-go's
// handlers would keep it, and counts what breaks client-go's contract: an
// add of an object it holds, an update from an object it does not hold,
// a delete of an object it does not hold, an object without the
// transform's label.
type recorder struct {
	mu      sync.Mutex
	objects map[string]metav1.Object
	initial int // adds of the initial list
	adds    int // other adds
	updates int
	deletes int
	tombs   int
	broken  []string
}

func newRecorder() *recorder { return &recorder{objects: map[string]metav1.Object{}} }

func (r *recorder) breaks(format string, args ...any) {
	r.broken = append(r.broken, fmt.Sprintf(format, args...))
}

func (r *recorder) OnAdd(obj any, initial bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := obj.(metav1.Object)
	k := storeKey(o.GetNamespace(), o.GetName())
	if _, ok := r.objects[k]; ok {
		r.breaks("add of %s, which the handler holds", k)
	}
	if o.GetLabels()["transformed"] != "yes" {
		r.breaks("add of %s untransformed", k)
	}
	if initial {
		r.initial++
	} else {
		r.adds++
	}
	r.objects[k] = o
}

func (r *recorder) OnUpdate(old, obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := obj.(metav1.Object)
	k := storeKey(o.GetNamespace(), o.GetName())
	if r.objects[k] != old.(metav1.Object) {
		r.breaks("update of %s from an object the handler does not hold", k)
	}
	r.updates++
	r.objects[k] = o
}

func (r *recorder) OnDelete(obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k string
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		k = tomb.Key
		r.tombs++
	} else {
		o := obj.(metav1.Object)
		k = storeKey(o.GetNamespace(), o.GetName())
		if o.GetLabels()["transformed"] != "yes" {
			r.breaks("delete of %s untransformed", k)
		}
		r.deletes++
	}
	if _, ok := r.objects[k]; !ok {
		r.breaks("delete of %s, which the handler does not hold", k)
	}
	delete(r.objects, k)
}

// markTransform is a transform that labels a copy of each object.
func markTransform(obj any) (any, error) {
	o := obj.(*metav1.PartialObjectMetadata).DeepCopy()
	if o.Labels == nil {
		o.Labels = map[string]string{}
	}
	o.Labels["transformed"] = "yes"
	return o, nil
}

// agrees reports why the store, and each recorder, do not hold what the
// API server does ("" when they do), by resourceVersion.
func agrees(a *apiServer, s *Store, recs ...*recorder) string {
	a.mu.Lock()
	want := map[string]string{}
	for _, o := range a.objects {
		want[storeKey(o.Namespace, o.Name)] = o.ResourceVersion
	}
	a.mu.Unlock()
	same := func(who string, got map[string]string) string {
		if len(got) != len(want) {
			return fmt.Sprintf("%s holds %d objects, the API server %d", who, len(got), len(want))
		}
		for k, rv := range want {
			if got[k] != rv {
				return fmt.Sprintf("%s holds %s at %q, the API server at %s", who, k, got[k], rv)
			}
		}
		return ""
	}
	got := map[string]string{}
	for _, obj := range s.List() {
		o := obj.(metav1.Object)
		got[storeKey(o.GetNamespace(), o.GetName())] = o.GetResourceVersion()
	}
	if why := same("the store", got); why != "" {
		return why
	}
	for n, r := range recs {
		r.mu.Lock()
		got := map[string]string{}
		for k, o := range r.objects {
			got[k] = o.GetResourceVersion()
		}
		r.mu.Unlock()
		if why := same(fmt.Sprintf("handler %d", n), got); why != "" {
			return why
		}
	}
	return ""
}

// eventually waits up to 20 s for agrees to hold.
func eventually(t *testing.T, a *apiServer, s *Store, recs ...*recorder) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		why := agrees(a, s, recs...)
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func startInformer(t *testing.T, a *apiServer, stream bool) (*Informer, *recorder, toolscache.ResourceEventHandlerRegistration, context.CancelFunc) {
	t.Helper()
	inf := NewInformer(a, &metav1.PartialObjectMetadata{}, 0, storeIndexers())
	inf.stream = stream
	inf.firstWait = time.Millisecond
	if err := inf.SetTransform(markTransform); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	reg, err := inf.AddEventHandler(rec)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go inf.RunWithContext(ctx)
	t.Cleanup(cancel)
	return inf, rec, reg, cancel
}

func fill(a *apiServer, n int) {
	for j := range n {
		a.put(fmt.Sprintf("ns-%d", j%7), fmt.Sprintf("obj-%d", j), map[string]string{"app": fmt.Sprint(j % 3)})
	}
}

// TestInformerFirstList: streamed, and listed a page at a time where the
// API server does not stream, the first list reaches the store and a
// handler added before the run as adds of the initial list, transformed;
// the informer and the handler's registration sync after it, and not
// before; the watch goes on from the list's resourceVersion.
func TestInformerFirstList(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		stream, refuses, slow bool
		lists, streams        int
	}{
		{"streamed", true, false, false, 0, 1},
		// The stream asks for no timeout: one that outlasted it ended
		// and was listed again a page at a time, from the start, beside
		// a set of every name it had stored.
		{"streamed, longer than a watch's timeout", true, false, true, 0, 1},
		{"listed", false, false, false, 3, 0},
		{"stream refused, listed", true, true, false, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newAPIServer()
			a.noStream, a.slowStream = tc.refuses, tc.slow
			fill(a, 1234)
			inf, rec, reg, _ := startInformer(t, a, tc.stream)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced, reg.HasSynced) {
				t.Fatal("the informer did not sync")
			}
			if why := agrees(a, inf.Store(), rec); why != "" {
				t.Fatalf("once synced: %s", why)
			}
			rec.mu.Lock()
			if rec.initial != 1234 || rec.adds != 0 || len(rec.broken) > 0 {
				t.Errorf("the handler had %d adds of the initial list and %d others, want 1,234 and 0; %v", rec.initial, rec.adds, rec.broken)
			}
			rec.mu.Unlock()
			a.mu.Lock()
			if a.lists != tc.lists || a.streams != tc.streams {
				t.Errorf("%d list requests and %d streams, want %d and %d", a.lists, a.streams, tc.lists, tc.streams)
			}
			a.mu.Unlock()
			if got := inf.LastSyncResourceVersion(); got != "1234" {
				t.Errorf("LastSyncResourceVersion %q, want the list's, 1234", got)
			}
			a.put("ns-0", "later", nil)
			a.remove("ns-1", "obj-1")
			eventually(t, a, inf.Store(), rec)
			if tc.refuses && inf.stream {
				t.Error("the informer will try to stream again an API server that refused")
			}
		})
	}
}

// TestInformerKeepsUp: through random writes, watches the API server ends
// (resumed from the last resourceVersion, no list) and events it forgets
// (a 410: listed again, what is gone deleted by tombstone), the store and
// every handler (one added before the run, one at the sync, one later)
// hold what the API server holds, told in client-go's order.
func TestInformerKeepsUp(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 8))
			a := newAPIServer()
			fill(a, 300)
			inf, first, _, _ := startInformer(t, a, stream)
			recs := []*recorder{first}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync")
			}
			relists := 0
			for step := range 2000 {
				if step%10 == 0 {
					time.Sleep(100 * time.Microsecond) // let the informer in between the writes
				}
				name := fmt.Sprintf("obj-%d", r.IntN(400))
				ns := fmt.Sprintf("ns-%d", r.IntN(7))
				switch k := r.IntN(100); {
				case k < 45:
					a.put(ns, name, map[string]string{"app": fmt.Sprint(r.IntN(3))})
				case k < 90:
					a.remove(ns, name)
				case k < 95:
					a.closeWatches()
				case k < 97:
					a.compact()
					a.closeWatches()
					relists++
				default:
					if len(recs) < 4 {
						rec := newRecorder()
						reg, err := inf.AddEventHandler(rec)
						if err != nil {
							t.Fatal(err)
						}
						if !reg.HasSynced() {
							t.Errorf("step %d: a handler added to a synced informer has not synced", step)
						}
						recs = append(recs, rec)
					}
				}
			}
			eventually(t, a, inf.Store(), recs...)
			for n, rec := range recs {
				rec.mu.Lock()
				if len(rec.broken) > 0 {
					t.Errorf("handler %d: %d broken events, the first: %s", n, len(rec.broken), rec.broken[0])
				}
				rec.mu.Unlock()
			}
			a.mu.Lock()
			t.Logf("%d compactions; %d lists, %d streams, %d watches resumed", relists, a.lists, a.streams, a.resumes)
			a.mu.Unlock()
		})
	}
}

// TestInformerOptions: the transform and watch error handler are set
// before the run and refused after; a removed handler is told nothing
// more; a stopped informer takes no handler.
func TestInformerOptions(t *testing.T) {
	a := newAPIServer()
	fill(a, 10)
	inf, rec, reg, cancel := startInformer(t, a, true)
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	if err := inf.SetTransform(nil); err == nil {
		t.Error("SetTransform after the start: no error")
	}
	if err := inf.SetWatchErrorHandlerWithContext(toolscache.DefaultWatchErrorHandler); err == nil {
		t.Error("SetWatchErrorHandlerWithContext after the start: no error")
	}
	if err := inf.RemoveEventHandler(reg); err != nil {
		t.Fatal(err)
	}
	second := newRecorder()
	if _, err := inf.AddEventHandler(second); err != nil {
		t.Fatal(err)
	}
	a.put("ns-0", "after", nil)
	eventually(t, a, inf.Store(), second)
	rec.mu.Lock()
	if _, ok := rec.objects["ns-0/after"]; ok {
		t.Error("a removed handler was told of an add")
	}
	rec.mu.Unlock()
	cancel()
	deadline := time.Now().Add(10 * time.Second)
	for !inf.IsStopped() {
		if time.Now().After(deadline) {
			t.Fatal("the informer did not stop")
		}
		time.Sleep(time.Millisecond)
	}
	if _, err := inf.AddEventHandler(newRecorder()); err == nil {
		t.Error("a stopped informer took a handler")
	}
}

// TestInformerShortWatches: an API server that ends every watch as it
// begins is asked again after a wait that grows, not at once without end.
func TestInformerShortWatches(t *testing.T) {
	a := newAPIServer()
	fill(a, 10)
	a.endAtOnce = true
	inf, _, _, _ := startInformer(t, a, true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	a.closeWatches() // the stream's, which goes on as the watch
	time.Sleep(500 * time.Millisecond)
	a.mu.Lock()
	defer a.mu.Unlock()
	// Waits of 1 ms doubling (startInformer), jittered: about 9 in 500 ms.
	if a.resumes > 20 {
		t.Errorf("%d watches in 500 ms of watches that end at once, want a wait between them", a.resumes)
	}
}

// TestInformerResyncs: every resync period a handler that takes resyncs
// is told of each stored object as an update from itself; one added with
// a ResyncPeriod of 0 is not.
func TestInformerResyncs(t *testing.T) {
	a := newAPIServer()
	fill(a, 20)
	inf := NewInformer(a, &metav1.PartialObjectMetadata{}, 20*time.Millisecond, storeIndexers())
	if err := inf.SetTransform(markTransform); err != nil {
		t.Fatal(err)
	}
	resynced, quiet := newRecorder(), newRecorder()
	if _, err := inf.AddEventHandler(resynced); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandlerWithResyncPeriod(quiet, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	deadline := time.Now().Add(20 * time.Second)
	for {
		resynced.mu.Lock()
		n := resynced.updates
		resynced.mu.Unlock()
		if n >= 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d updates in 20 s of resyncs every 20 ms of 20 objects", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	quiet.mu.Lock()
	defer quiet.mu.Unlock()
	if quiet.updates != 0 || len(quiet.broken) > 0 {
		t.Errorf("a handler without resyncs was told of %d updates; %v", quiet.updates, quiet.broken)
	}
}

// BenchmarkAddHandlerToSynced: a handler added to a synced informer of
// 100,000 objects in 1,000 namespaces, told of each as an add of the
// initial list: through a slice of every object (Store.Observe, as the
// Informer did at df2829d) and a namespace at a time (observeEach, the
// Informer's). B/op is what the add holds while it tells the handler.
func BenchmarkAddHandlerToSynced(b *testing.B) {
	s := New(storeIndexers())
	for j := range 100_000 {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", j%1000), Name: fmt.Sprintf("obj-%d", j)}}
		if err := s.Add(o); err != nil {
			b.Fatal(err)
		}
	}
	h := toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) {}}
	b.Run("slice", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			// What Store.Observe did before b8944b8: a slice of every
			// object stored.
			s.mu.Lock()
			stored := make([]any, 0, s.count)
			for _, ns := range s.objects {
				stored = ns.appendTo(stored)
			}
			stop := s.observeLocked(h)
			s.mu.Unlock()
			for _, obj := range stored {
				h.OnAdd(obj, true)
			}
			stop()
		}
	})
	b.Run("by-namespace", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			s.observeEach(h, func(obj any) { h.OnAdd(obj, true) })()
		}
	})
}
