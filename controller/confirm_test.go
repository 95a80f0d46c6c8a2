package controller

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestConfirmedFinder: the webhook's finder answers from the cache when it
// has Locks, and otherwise from the API server, so that a Lock the cache
// has not seen yet still protects its target (found by the chaos run of
// issue 7: a delete sent right after a Lock's create was answered went
// through).
func TestConfirmedFinder(t *testing.T) {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	stack := schema.GroupKind{Group: "core.navique.com", Kind: "Stack"}
	forge := types.NamespacedName{Namespace: "forge", Name: "forge"}
	cached := func(locks ...client.Object) *Finder {
		c := fake.NewClientBuilder().WithScheme(s).WithIndex(&lockv1alpha1.Lock{}, TargetIndex, indexLockTarget).WithObjects(locks...).Build()
		return &Finder{reader: c, synced: func() bool { return true }}
	}
	apiServer := func(locks ...client.Object) client.Reader {
		return fake.NewClientBuilder().WithScheme(s).WithObjects(locks...).Build()
	}
	failing := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("connection refused")
		},
	}).Build()
	deleting := newLock("forge", "deleting", "", "Stack", "forge")
	deleting.Finalizers = []string{"example.com/keep"}
	deleting.DeletionTimestamp = ptrNow()

	cases := map[string]struct {
		reason  string
		finder  *ConfirmedFinder
		want    []string
		wantErr bool
	}{
		"CacheHasLocks": {
			reason: "Locks in the cache deny at once; the API server is not read (it would fail).",
			finder: NewConfirmedFinder(cached(newLock("forge", "a", "", "Stack", "forge")), failing),
			want:   []string{"a"},
		},
		"CacheLagsBehind": {
			reason: "A Lock the cache has not seen yet is found on the API server.",
			finder: NewConfirmedFinder(cached(), apiServer(
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
			finder: NewConfirmedFinder(cached(), apiServer(newLock("forge", "other-name", "", "Stack", "other"))),
		},
		"APIServerUnreadable": {
			reason:  "When the API server cannot confirm, FindLocks fails, and the webhook fails closed.",
			finder:  NewConfirmedFinder(cached(), failing),
			wantErr: true,
		},
		"CacheNotSynced": {
			reason:  "Before the cache has synced, FindLocks fails as the Finder does.",
			finder:  NewConfirmedFinder(&Finder{synced: func() bool { return false }}, apiServer()),
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			locks, err := tc.finder.FindLocks(context.Background(), stack, forge)
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\nFindLocks(...): error %v, want error %v", tc.reason, err, tc.wantErr)
			}
			var names []string
			for _, l := range locks {
				names = append(names, l.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("%s\nFindLocks(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func ptrNow() *metav1.Time {
	now := metav1.Now()
	return &now
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

// TestConfirmedFinderSharesReads: confirmations that arrive while
// maxNamespaceReads reads of their namespace are under way share the next
// read, which starts after they arrived, so that a burst of deletes costs a
// few reads, not one each.
func TestConfirmedFinderSharesReads(t *testing.T) {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	cached := &Finder{reader: fake.NewClientBuilder().WithScheme(s).WithIndex(&lockv1alpha1.Lock{}, TargetIndex, indexLockTarget).Build(), synced: func() bool { return true }}
	live := &blockingReader{
		Reader:  fake.NewClientBuilder().WithScheme(s).WithObjects(newLock("forge", "new", "", "Stack", "forge")).Build(),
		started: make(chan struct{}, 20), release: make(chan struct{}),
	}
	f := NewConfirmedFinder(cached, live)
	stack := schema.GroupKind{Group: "core.navique.com", Kind: "Stack"}
	find := func(name string, out chan<- []string) {
		locks, err := f.FindLocks(context.Background(), stack, types.NamespacedName{Namespace: "forge", Name: name})
		if err != nil {
			t.Error(err)
		}
		var names []string
		for _, l := range locks {
			names = append(names, l.Name)
		}
		out <- names
	}
	first := make(chan []string, 1)
	go find("forge", first)
	<-live.started // The first read is under way.
	const n = 12
	rest := make(chan []string, n)
	for range n {
		go find("forge", rest)
	}
	// Wait until all but maxNamespaceReads-1 of them have joined the
	// pending read, then let the reads go.
	for {
		f.mu.Lock()
		joined := 0
		if r := f.namespaces["forge"].pending; r != nil {
			joined = r.waiters
		}
		f.mu.Unlock()
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
			t.Errorf("FindLocks(...): -want, +got:\n%s", diff)
		}
	}
	if got, want := live.lists.Load(), int32(maxNamespaceReads+1); got != want {
		t.Errorf("%d reads of the API server for %d concurrent confirmations, want %d (%d under way, and one shared by those that arrived meanwhile)", got, n+1, want, maxNamespaceReads)
	}
}
