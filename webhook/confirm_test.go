package webhook

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

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
	cached := func(locks ...lockv1alpha1.Lock) LockIndex {
		return LockIndexFunc(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return locks, nil })
	}
	apiServer := func(locks ...client.Object) LockLister {
		return fake.NewClientBuilder().WithScheme(s).WithObjects(locks...).Build()
	}
	failing := fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("connection refused")
		},
	}).Build()
	deleting := newLock("forge", "deleting", "", "Stack", "forge")
	deleting.Finalizers = []string{"example.com/keep"}
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}

	cases := map[string]struct {
		reason  string
		finder  *lockFinder
		want    []string
		wantErr bool
	}{
		"CacheHasLocks": {
			reason: "Locks in the index deny at once; the API server is not read (it would fail).",
			finder: newLockFinder(cached(*newLock("forge", "a", "", "Stack", "forge")), failing),
			want:   []string{"a"},
		},
		"CacheLagsBehind": {
			reason: "A Lock the cache has not seen yet is found on the API server; only live Locks of the same group, kind, name and namespace count.",
			finder: newLockFinder(cached(), apiServer(
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
			finder: newLockFinder(cached(), apiServer(newLock("forge", "other-name", "", "Stack", "other"))),
		},
		"CacheOnly": {
			reason: "Without a reader of the API server, the index alone decides.",
			finder: newLockFinder(cached(), nil),
		},
		"APIServerUnreadable": {
			reason:  "When the API server cannot confirm, find fails, and the webhook fails closed.",
			finder:  newLockFinder(cached(), failing),
			wantErr: true,
		},
		"IndexNotSynced": {
			reason: "When the index cannot answer, find fails without reading the API server.",
			finder: newLockFinder(LockIndexFunc(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
				return nil, errors.New("the Lock cache has not synced yet")
			}), apiServer()),
			wantErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			locks, err := tc.finder.find(context.Background(), forgeStack)
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
	f := newLockFinder(LockIndexFunc(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil }), live)
	find := func(out chan<- []string) {
		locks, err := f.find(context.Background(), forgeStack)
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
			t.Errorf("find(...): -want, +got:\n%s", diff)
		}
	}
	if got, want := live.lists.Load(), int32(maxNamespaceReads+1); got != want {
		t.Errorf("%d reads of the API server for %d concurrent confirmations, want %d (%d under way, and one shared by those that arrived meanwhile)", got, n+1, want, maxNamespaceReads)
	}
}
