package readmodel

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// heapObjects is the number of objects each BenchmarkCacheHeap run stores.
const heapObjects = 20000

// heapLocks is the number of Locks each BenchmarkLockCacheHeap run stores:
// the index's buckets (indexBuckets) share their sets at that size.
const heapLocks = 100000

// apiServerObjects returns n Stacks' metadata as the API server sends them
// to a metadata informer (a PartialObjectMetadataList in protobuf, as
// client-go's metadata client asks for it): spread by tens over n/10
// namespaces, one in ten owning the next nine, with labels, kubectl's
// last-applied annotation and managedFields.
func apiServerObjects(tb testing.TB, n int) []byte {
	tb.Helper()
	return apiServerTargets(tb, n, false, false)
}

// apiServerTargets is apiServerObjects, each object carrying, when locked,
// the lock annotation lockguard writes on a target (naming one Lock) and,
// when selected, a label of its own, which a selector Lock of its own
// matches (as the scale bench's, benchmarks.md section 9).
func apiServerTargets(tb testing.TB, n int, locked, selected bool) []byte {
	tb.Helper()
	list := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "PartialObjectMetadataList"}}
	var owner types.UID
	for i := range n {
		ns := fmt.Sprintf("team-%04d", i/10)
		name := fmt.Sprintf("stack-%07d", i)
		uid := types.UID(fmt.Sprintf("1c9e3b7a-5d2f-4e8a-9b6c-%012d", i))
		m := metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: ns, UID: uid, ResourceVersion: fmt.Sprint(100000 + i), Generation: 1,
				CreationTimestamp: metav1.Now(),
				Labels:            map[string]string{"app.kubernetes.io/name": "forge", "app.kubernetes.io/part-of": "platform", "tier": "backend"},
				Annotations: map[string]string{
					"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(`{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"annotations":{},"labels":{"app.kubernetes.io/name":"forge","app.kubernetes.io/part-of":"platform","tier":"backend"},"name":%q,"namespace":%q},"spec":{"size":"small"}}`+"\n", name, ns),
				},
				ManagedFields: []metav1.ManagedFieldsEntry{{
					Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "core.navique.com/v1alpha1",
					Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:tier":{}}},"f:spec":{".":{},"f:size":{}}}`)},
				}},
			},
		}
		if locked {
			m.Annotations[lockv1alpha1.LockedAnnotation] = fmt.Sprintf("lock-%07d", i)
		}
		if selected {
			m.Labels["bench.navique.com/lock"] = fmt.Sprintf("lock-%07d", i)
		}
		if i%10 == 0 {
			owner = uid
		} else {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: fmt.Sprintf("stack-%07d", i-i%10), UID: owner, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		}
		list.Items = append(list.Items, m)
	}
	data, err := list.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// storeHeap decodes data, passes each object through transform and adds
// it to a store indexed as lockguard's metadata informers are (the
// controller-runtime cache's namespace index and OwnerIndex's owner
// index), and returns the heap the store then holds per object (after a
// GC, the decoded list and data freed), and the store (to keep it alive).
func storeHeap(tb testing.TB, data []byte, transform toolscache.TransformFunc, newStore func(toolscache.Indexers) toolscache.Indexer) (float64, toolscache.Indexer) {
	tb.Helper()
	return heapOfStore(tb, newStore(toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc, ownerIndex: indexByOwner}), transform, func() []any {
		// The reflector decodes each page (or, streaming, each object)
		// and stores pointers into the decoded items, as here.
		items := decodeItems(tb, data)
		objs := make([]any, len(items))
		for i := range items {
			objs[i] = &items[i]
		}
		return objs
	})
}

// heapOfStore decodes objects (decode), passes each through transform and
// adds it to store (empty), and returns the live heap the store then
// holds per object (measured from before the decoding, after a GC), and
// the store.
func heapOfStore(tb testing.TB, store toolscache.Indexer, transform toolscache.TransformFunc, decode func() []any) (float64, toolscache.Indexer) {
	tb.Helper()
	before := liveHeap()
	objs := decode()
	for i, o := range objs {
		obj, err := transform(o)
		if err != nil {
			tb.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			tb.Fatal(err)
		}
		objs[i] = nil
	}
	n := len(objs)
	objs = nil
	after := liveHeap()
	runtime.KeepAlive(store)
	return float64(after-before) / float64(n), store
}

func decodeItems(tb testing.TB, data []byte) []metav1.PartialObjectMetadata {
	var list metav1.PartialObjectMetadataList
	if err := list.Unmarshal(data); err != nil {
		tb.Fatal(err)
	}
	return list.Items
}

func liveHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkCacheHeap reports the live heap per unlocked object that
// lockguard's metadata cache keeps, with the transform before issue 38's
// cut, with the one that shared label sets and with CacheTransform (a
// Meta), in one run:
//
//	go test -run '^$' -bench CacheHeap -benchtime 3x ./internal/readmodel/
func BenchmarkCacheHeap(b *testing.B) {
	data := apiServerObjects(b, heapObjects)
	for _, c := range []struct {
		name      string
		transform func() toolscache.TransformFunc // a new one each run: its interner starts empty
	}{
		{"none", func() toolscache.TransformFunc { return func(in any) (any, error) { return in, nil } }},
		{"before", transformBefore},
		{"shared", transformShared},
		{"after", func() toolscache.TransformFunc { return CacheTransform(nil, nil) }},
		{"metastore", func() toolscache.TransformFunc { return CacheTransform(nil, nil) }},
	} {
		newStore := clientGoStore
		if c.name == "metastore" {
			newStore = newMetaIndexer
		}
		b.Run(c.name, func(b *testing.B) {
			var sum float64
			for range b.N {
				per, store := storeHeap(b, data, c.transform(), newStore)
				sum += per
				runtime.KeepAlive(store)
			}
			b.ReportMetric(sum/float64(b.N), "B/object")
		})
	}
}

// transformShared is CacheTransform's handling of a target before it kept
// a Meta (e2472f0 to d41c9cf: trimmed, with shared label sets), kept for
// BenchmarkCacheHeap's comparison only.
func transformShared() toolscache.TransformFunc {
	shared := newInterner()
	maps := map[string]map[string]string{}
	return func(in any) (any, error) {
		o := in.(*metav1.PartialObjectMetadata)
		trimMetadata(o, shared, nil, nil)
		if key := labelText(o.Labels); key != "" {
			if m, ok := maps[key]; ok {
				o.Labels = m
			} else {
				maps[key] = o.Labels
			}
		}
		return in, nil
	}
}

// transformBefore is CacheTransform's handling of a target as it was
// before issue 38's cut (at 0244ac1), kept for BenchmarkCacheHeap's
// comparison only.
func transformBefore() toolscache.TransformFunc {
	return func(in any) (any, error) {
		o := in.(*metav1.PartialObjectMetadata)
		locked, has := o.Annotations[lockv1alpha1.LockedAnnotation]
		switch {
		case !has:
			o.Annotations = nil
		case len(o.Annotations) > 1:
			o.Annotations = map[string]string{lockv1alpha1.LockedAnnotation: locked}
		}
		o.GenerateName = ""
		switch v, has := o.Labels[lockv1alpha1.HasLocksLabel]; {
		case o.Namespace != "":
		case has:
			o.Labels = map[string]string{lockv1alpha1.HasLocksLabel: v}
		default:
			o.Labels = nil
		}
		for i := range o.OwnerReferences {
			o.OwnerReferences[i].Controller, o.OwnerReferences[i].BlockOwnerDeletion = nil, nil
		}
		if o.OwnerReferences = slices.Clip(o.OwnerReferences); len(o.OwnerReferences) == 0 {
			o.OwnerReferences = nil
		}
		if o.Finalizers = slices.DeleteFunc(o.Finalizers, func(f string) bool {
			return f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents
		}); len(o.Finalizers) == 0 {
			o.Finalizers = nil
		}
		o.ManagedFields = nil
		return in, nil
	}
}

// BenchmarkCacheStoreShare reports, of the heap per object that
// BenchmarkCacheHeap's stores hold, what the store itself takes apart
// from the Metas it holds (its objects by key, the keys, the namespace
// and owner indexes): client-go's indexer, and lockguard's
// (cachestore.Store, "metastore").
//
//	go test -run '^$' -bench CacheStoreShare -benchtime 3x ./internal/readmodel/
func BenchmarkCacheStoreShare(b *testing.B) {
	data := apiServerObjects(b, heapObjects)
	for _, c := range []struct {
		name     string
		newStore func(toolscache.Indexers) toolscache.Indexer
	}{{"client-go", clientGoStore}, {"metastore", newMetaIndexer}} {
		b.Run(c.name, func(b *testing.B) {
			var sum float64
			for range b.N {
				_, store := storeHeap(b, data, CacheTransform(nil, nil), c.newStore)
				metas := store.List()
				with := liveHeap()
				runtime.KeepAlive(store) // live until with is measured
				without := liveHeap()
				sum += float64(with-without) / float64(len(metas))
				runtime.KeepAlive(metas)
			}
			b.ReportMetric(sum/float64(b.N), "B/object")
		})
	}
}

// clientGoStore is the store client-go's informer makes.
func clientGoStore(indexers toolscache.Indexers) toolscache.Indexer {
	return toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
}

// newMetaIndexer is the store lockguard's informers keep (NewInformerFunc).
func newMetaIndexer(indexers toolscache.Indexers) toolscache.Indexer { return cachestore.New(indexers) }

// BenchmarkCacheHeapOwnLabels reports the live heap per unlocked object
// that CacheTransform's Meta keeps in lockguard's store when the objects
// under one owner carry labels of their own (an app label of 100 values,
// the next one to each sibling, as benchmarks.md section 9's bench seeds
// them: no two siblings share a shape), against the same objects with
// their labels dropped before the transform (what the store would keep
// if it kept only the labels some selector reads, and none read these):
//
//	go test -run '^$' -bench CacheHeapOwnLabels -benchtime 3x ./internal/readmodel/
func BenchmarkCacheHeapOwnLabels(b *testing.B) {
	data := apiServerObjects(b, heapObjects)
	apps := make([]string, 100)
	for i := range apps {
		apps[i] = fmt.Sprintf("app-%d", i)
	}
	for _, keep := range []bool{true, false} {
		b.Run(fmt.Sprintf("labels=%t", keep), func(b *testing.B) {
			var sum float64
			for range b.N {
				base := CacheTransform(nil, nil)
				i := 0
				transform := func(in any) (any, error) {
					o := in.(*metav1.PartialObjectMetadata)
					if keep {
						o.Labels = map[string]string{"app": apps[i%100], "tier": "backend"}
					} else {
						o.Labels = nil
					}
					i++
					return base(o)
				}
				per, store := storeHeap(b, data, transform, newMetaIndexer)
				sum += per
				runtime.KeepAlive(store)
			}
			b.ReportMetric(sum/float64(b.N), "B/object")
		})
	}
}
