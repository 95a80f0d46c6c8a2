// Package readmodeltest builds lockguard's Lock index (readmodel.LockIndex)
// over a fixed list of Locks, without an API server, for the unit tests of
// the packages that read it (the webhook's guards, the reconciler).
package readmodeltest

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// Index returns lockguard's Lock index over locks, synced, on the clock
// now; its informer lists locks once (through lockguard's cache
// transform, readmodel.CacheTransform) and then watches nothing. It stops
// at the end of the test.
func Index(tb testing.TB, now func() time.Time, locks ...lockv1alpha1.Lock) *readmodel.LockIndex {
	tb.Helper()
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		tb.Fatal(err)
	}
	lw := &toolscache.ListWatch{
		ListFunc: func(metav1.ListOptions) (runtime.Object, error) {
			// Copies: the cache's transform changes the selectors and
			// conditions of the Locks it is given.
			items := make([]lockv1alpha1.Lock, len(locks))
			for i := range locks {
				locks[i].DeepCopyInto(&items[i])
			}
			return &lockv1alpha1.LockList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: items}, nil
		},
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
	inf := toolscache.NewSharedIndexInformer(listThenWatch{lw}, &lockv1alpha1.Lock{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	// The cache's transform, as lockguard's: the index reads
	// readmodel.CachedLocks.
	if err := inf.SetTransform(readmodel.CacheTransform(nil, nil)); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	index, err := readmodel.NewLockIndex(ctx, &informertest.FakeInformers{Scheme: s, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		lockv1alpha1.GroupVersion.WithKind("Lock"): inf,
	}})
	if err != nil {
		tb.Fatal(err)
	}
	index.SetClock(now)
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), index.HasSynced) {
		tb.Fatal("the Lock informer did not sync")
	}
	return index
}

// listThenWatch is a ListWatch whose reflector lists, then watches.
type listThenWatch struct{ *toolscache.ListWatch }

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }
