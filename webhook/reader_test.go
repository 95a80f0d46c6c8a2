package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func newLock(ns, name, apiVersion, kind, target string) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: target}},
	}
}

func lockScheme(t testing.TB) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestConfirm: the handler's finder answers from the index when it has
// Locks, and otherwise from the API server, so that a Lock the cache has
// not seen yet still protects its target (found by the chaos run of issue
// 7: a delete sent right after a Lock's create was answered went through).
func TestConfirm(t *testing.T) {
	s := lockScheme(t)
	cached := func(locks ...lockv1alpha1.Lock) Locks {
		return ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return locks, nil })
	}
	apiServer := func(locks ...client.Object) LockLister {
		return fake.NewClientBuilder().WithScheme(s).WithObjects(locks...).Build()
	}
	failing := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("connection refused")
		},
	}).Build()
	unsynced := ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		return nil, errors.New("the Lock cache has not synced yet")
	})
	deleting := newLock("forge", "deleting", "", "Stack", "forge")
	deleting.Finalizers = []string{"example.com/keep"}
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	cases := map[string]struct {
		reason  string
		finder  *lockReader
		want    []string
		wantErr bool
	}{
		"CacheHasLocks": {
			reason: "Locks in the index deny at once; the API server is not read (it would fail).",
			finder: readerOf(cached(*newLock("forge", "a", "", "Stack", "forge")), failing),
			want:   []string{"a"},
		},
		"CacheLagsBehind": {
			reason: "A Lock the cache has not seen yet is found on the API server; only live Locks of the same group, kind, name and namespace count.",
			finder: readerOf(cached(), apiServer(
				newLock("forge", "new", "core.navique.com/v1beta1", "Stack", "forge"),
				newLock("forge", "other-name", "", "Stack", "other"),
				newLock("forge", "other-kind", "", "PostgresCluster", "forge"),
				newLock("forge", "other-group", "apps/v1", "Stack", "forge"),
				newLock("elsewhere", "other-ns", "", "Stack", "forge"),
				deleting,
			)),
			want: []string{"new"},
		},
		"NoLockAnywhere": {
			reason: "Without a Lock in the cache or on the API server, nothing protects the object.",
			finder: readerOf(cached(), apiServer(newLock("forge", "other-name", "", "Stack", "other"))),
		},
		"CacheOnly": {
			reason: "Without a reader of the API server, the index alone decides.",
			finder: readerOf(cached(), nil),
		},
		"APIServerUnreadable": {
			reason:  "When the API server cannot confirm, find fails, and the webhook fails closed.",
			finder:  readerOf(cached(), failing),
			wantErr: true,
		},
		"IndexNotSynced": {
			reason: "When the index cannot answer (a replica that just started), the API server's Locks decide.",
			finder: readerOf(unsynced, apiServer(newLock("forge", "a", "", "Stack", "forge"), newLock("forge", "other", "", "Stack", "other"))),
			want:   []string{"a"},
		},
		"IndexNotSyncedNoLock": {
			reason: "When the index cannot answer, and the API server holds no Lock of the object, nothing protects it.",
			finder: readerOf(unsynced, apiServer(newLock("forge", "other", "", "Stack", "other"))),
		},
		"IndexNotSyncedAPIServerUnreadable": {
			reason:  "When neither the index nor the API server can answer, find fails, and the webhook fails closed.",
			finder:  readerOf(unsynced, failing),
			wantErr: true,
		},
		"IndexNotSyncedCacheOnly": {
			reason:  "Without a reader of the API server, an index that cannot answer fails find.",
			finder:  readerOf(unsynced, nil),
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			locks, err := tc.finder.find(context.Background(), forgeStack.Object(nil))
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nfind(...): error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, names(locks)); diff != "" {
				t.Errorf("%s\nfind(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func names(locks []lockv1alpha1.Lock) []string {
	var n []string
	for _, l := range locks {
		n = append(n, l.Name)
	}
	return n
}

// blockingReader counts Lists and holds each until released.
type blockingReader struct {
	client.Reader
	lists   atomic.Int32
	started chan struct{}
	release chan struct{}
}

func (r *blockingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.lists.Add(1)
	r.started <- struct{}{}
	<-r.release
	return r.Reader.List(ctx, list, opts...)
}

// TestConfirmSharesReads: confirmations that arrive while
// maxNamespaceReads reads of their namespace are under way share the next
// read, which starts after they arrived, so that a burst of deletes costs a
// few reads, not one each.
func TestConfirmSharesReads(t *testing.T) {
	live := &blockingReader{
		Reader:  fake.NewClientBuilder().WithScheme(lockScheme(t)).WithObjects(newLock("forge", "new", "", "Stack", "forge")).Build(),
		started: make(chan struct{}, 20), release: make(chan struct{}),
	}
	f := readerOf(ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil }), live)
	find := func(out chan<- []string) {
		locks, err := f.find(context.Background(), forgeStack.Object(nil))
		if err != nil {
			t.Error(err)
		}
		out <- names(locks)
	}
	first := make(chan []string, 1)
	go find(first)
	<-live.started // The first read is under way.
	const n = 12
	rest := make(chan []string, n)
	for range n {
		go find(rest)
	}
	// Wait until all but maxNamespaceReads-1 of them have joined the
	// pending read, then let the reads go.
	for {
		f.api.mu.Lock()
		joined := 0
		if r := f.api.namespaces["forge"].pending; r != nil {
			joined = r.waiters
		}
		f.api.mu.Unlock()
		if joined == n-(maxNamespaceReads-1) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(live.release)
	for range n + 1 {
		var got []string
		select {
		case got = <-first:
		case got = <-rest:
		}
		if diff := cmp.Diff([]string{"new"}, got); diff != "" {
			t.Errorf("find(...): -want, +got:\n%s", diff)
		}
	}
	if got, want := live.lists.Load(), int32(maxNamespaceReads+1); got != want {
		t.Errorf("%d reads of the API server for %d concurrent confirmations, want %d (%d under way, and one shared by those that arrived meanwhile)", got, n+1, want, maxNamespaceReads)
	}
}

// TestGuardsShareReads: the namespace guard reads a namespace's Locks
// through the reads the object guard's confirmations share: decisions of
// either guard that arrive while a read of their namespace is under way
// share the next one.
func TestGuardsShareReads(t *testing.T) {
	live := &blockingReader{
		Reader:  fake.NewClientBuilder().WithScheme(lockScheme(t)).Build(),
		started: make(chan struct{}, 20), release: make(chan struct{}),
	}
	empty := ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil })
	h := NewHandler(Config{Locks: empty, Live: live, Cluster: &ClusterConfig{API: live, Kinds: guardMapper()}})
	const n = 3 // within maxClusterDecisions
	answers := make(chan admission.Response, n+1)
	go func() {
		answers <- h.Decide(context.Background(), request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", "forge", "forge"))
	}()
	<-live.started // The object guard's read is under way.
	for range n {
		go func() { answers <- h.Decide(context.Background(), namespaceRequest("forge")) }()
	}
	for {
		h.locks.api.mu.Lock()
		joined := 0
		if r := h.locks.api.namespaces["forge"].pending; r != nil {
			joined = r.waiters
		}
		h.locks.api.mu.Unlock()
		if joined == n {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(live.release)
	for range n + 1 {
		if resp := <-answers; !resp.Allowed {
			t.Errorf("Decide(...): %+v, want allowed (no Locks)", resp.Result)
		}
	}
	if got := live.lists.Load(); got != 2 {
		t.Errorf("%d lists of namespace forge for a delete and %d namespace deletes arriving during its read, want 2 (its own, and one shared)", got, n)
	}
}

// pagingLister serves a namespace's Locks in pages of the requested
// Limit, as the API server does, and records each List's options and
// deadline.
type pagingLister struct {
	locks     []lockv1alpha1.Lock
	mu        sync.Mutex
	pages     int
	deadlines []time.Time
}

func (p *pagingLister) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	p.mu.Lock()
	p.pages++
	d, _ := ctx.Deadline()
	p.deadlines = append(p.deadlines, d)
	p.mu.Unlock()
	start := 0
	if o.Continue != "" {
		var err error
		if start, err = strconv.Atoi(o.Continue); err != nil {
			return err
		}
	}
	end := len(p.locks)
	if o.Limit > 0 {
		end = min(end, start+int(o.Limit))
	}
	out := list.(*lockv1alpha1.LockList)
	out.Items = slices.Clone(p.locks[start:end])
	out.Continue = ""
	if end < len(p.locks) {
		out.Continue = strconv.Itoa(end)
	}
	return nil
}

// TestConfirmPages: a namespace of many Locks is read in pages of
// confirmPageSize, and a Lock on the last page still protects its target.
func TestConfirmPages(t *testing.T) {
	const n = 2*confirmPageSize + 7
	live := &pagingLister{}
	for i := range n {
		live.locks = append(live.locks, *newLock("forge", fmt.Sprintf("l-%04d", i), "", "Stack", fmt.Sprintf("s-%04d", i)))
	}
	live.locks[n-1].Spec.TargetRef.Name = "forge" // The last Lock of the last page.
	f := readerOf(ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil }), live)
	locks, err := f.find(context.Background(), forgeStack.Object(nil))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{fmt.Sprintf("l-%04d", n-1)}, names(locks)); diff != "" {
		t.Errorf("find(...) over %d Locks: -want, +got:\n%s", n, diff)
	}
	if live.pages != 3 {
		t.Errorf("%d Lists for %d Locks, want 3 pages of at most %d", live.pages, n, confirmPageSize)
	}
}

// TestConfirmDeadline: the confirming read lasts as long as the
// confirmation may wait (ServeHTTP's context: the API server's ?timeout=
// less a margin), not a fixed time; without a deadline, confirmTimeout.
func TestConfirmDeadline(t *testing.T) {
	cases := map[string]struct {
		reason  string
		timeout time.Duration // of the confirmation's context; 0 for none
	}{
		"APIServerTimeout": {reason: "A review with ?timeout=30s: its read may last 28 s.", timeout: 28 * time.Second},
		"Short":            {reason: "A review with ?timeout=1s: 750 ms.", timeout: 750 * time.Millisecond},
		"NoDeadline":       {reason: "Handle's caller gave no deadline: confirmTimeout.", timeout: 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			live := &pagingLister{}
			f := readerOf(ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil }), live)
			ctx := context.Background()
			want := time.Now().Add(confirmTimeout)
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
				want, _ = ctx.Deadline()
			}
			if _, err := f.find(ctx, forgeStack.Object(nil)); err != nil {
				t.Fatal(err)
			}
			// Without a deadline of its own the read's is computed a moment
			// after want: allow the test's own scheduling.
			if got := live.deadlines[0]; got.Before(want) || got.Sub(want) > time.Second {
				t.Errorf("%s\nthe read's deadline is %s after the confirmation's start, want %s", tc.reason, time.Until(got).Round(time.Second), time.Until(want).Round(time.Second))
			}
		})
	}
}
