package webhook_test

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/webhook"
)

// lockIndexOf returns lockguard's Lock index on controller-runtime's
// informer cache, with lockguard's transform, fed by an in-memory ListWatch
// of list: the code path of lockguard, without an API server. The cache
// stops at the end of the test.
func lockIndexOf(tb testing.TB, list *lockv1alpha1.LockList) *readmodel.LockIndex {
	tb.Helper()
	index, _ := lockCacheOf(tb, list)
	return index
}

// lockCacheOf is lockIndexOf, and the cache's Lock informer.
func lockCacheOf(tb testing.TB, list *lockv1alpha1.LockList) (*readmodel.LockIndex, toolscache.SharedIndexInformer) {
	tb.Helper()
	return lockCacheWatching(tb, list, nil)
}

// lockCacheWatching is lockCacheOf whose Lock watch sends what the test
// sends on watcher (nil: nothing).
func lockCacheWatching(tb testing.TB, list *lockv1alpha1.LockList, watcher *watch.FakeWatcher) (*readmodel.LockIndex, toolscache.SharedIndexInformer) {
	tb.Helper()
	scheme := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(scheme); err != nil {
		tb.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(lockv1alpha1.GroupVersion.WithKind("Lock"), meta.RESTScopeNamespace)
	if list.ResourceVersion == "" {
		list.ResourceVersion = "1"
	}
	newInformer := readmodel.NewInformerFunc(readmodel.CacheTransform(nil, nil), nil)
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{
		Scheme:           scheme,
		Mapper:           mapper,
		DefaultTransform: readmodel.CacheTransform(nil, nil),
		// The informer is lockguard's (readmodel.NewInformerFunc: its
		// own store, as cmd/lockguard/manager builds it), with
		// controller-runtime's indexers and the transform; only the
		// ListWatch is replaced by an in-memory one.
		NewInformer: func(_ toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
			return newInformer(&staticListWatch{list: list, watcher: watcher}, obj, resync, indexers)
		},
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	index, err := readmodel.NewLockIndex(ctx, c)
	if err != nil {
		tb.Fatal(err)
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		tb.Fatal("the cache did not sync")
	}
	inf, err := c.GetInformer(ctx, &lockv1alpha1.Lock{})
	if err != nil {
		tb.Fatal(err)
	}
	return index, inf.(toolscache.SharedIndexInformer)
}

// staticListWatch lists a fixed LockList and then watches watcher, or
// nothing when it is nil.
type staticListWatch struct {
	list    *lockv1alpha1.LockList
	watcher *watch.FakeWatcher
}

func (s *staticListWatch) List(metav1.ListOptions) (runtime.Object, error) { return s.list, nil }
func (s *staticListWatch) Watch(metav1.ListOptions) (watch.Interface, error) {
	if s.watcher != nil {
		return s.watcher, nil
	}
	return watch.NewFake(), nil
}

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (s *staticListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// lockguard's Lock index is the webhook's one read interface.
var _ webhook.Locks = (*readmodel.LockIndex)(nil)
