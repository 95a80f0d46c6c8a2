package readmodel

import (
	"encoding/json"
	"fmt"
	goruntime "runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// apiServerLocks returns n Locks as the API server sends them to the Lock
// informer (a LockList in JSON, as it serves custom resources), as the
// scale bench (benchmarks.md §9) seeds them: spread round robin over n/100
// namespaces, half by targetRef and half by selector, each on a Stack of
// its own, with the reason the bench writes, managedFields, and the status
// lockguard's reconciler writes on an active Lock.
func apiServerLocks(tb testing.TB, n int) []byte {
	tb.Helper()
	list := lockv1alpha1.LockList{TypeMeta: metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "LockList"}}
	now := metav1.Now()
	for i := range n {
		ns := fmt.Sprintf("team-%04d", i%max(n/100, 1))
		name, target := fmt.Sprintf("lock-%07d", i), fmt.Sprintf("stack-%07d", i)
		l := lockv1alpha1.Lock{
			TypeMeta: metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("7d0c8e1a-2b3f-4c5d-8e9f-%012d", i)),
				ResourceVersion: fmt.Sprint(200000 + i), Generation: 1, CreationTimestamp: now,
				ManagedFields: []metav1.ManagedFieldsEntry{{
					Manager: "kubectl-lock", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: lockv1alpha1.GroupVersion.String(),
					Time: ptr.To(now), FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{".":{},"f:reason":{},"f:targetRef":{".":{},"f:kind":{},"f:name":{}}}}`)},
				}},
			},
			Spec: lockv1alpha1.LockSpec{Reason: "Production environment - remove this Lock deliberately before deleting."},
		}
		var message string
		if i%2 == 0 {
			l.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: target}
			message = fmt.Sprintf("deleting Stack %q is denied while this Lock exists: %s", target, l.Spec.Reason)
		} else {
			l.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"bench.navique.com/lock": name}}
			message = fmt.Sprintf("deleting the resources of namespace %q that this Lock's selector matches is denied while this Lock exists: %s", ns, l.Spec.Reason)
		}
		l.Status = lockv1alpha1.LockStatus{
			Scope: l.ScopeString(), Active: true, ObservedGeneration: 1,
			Conditions: []metav1.Condition{{
				Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive,
				Message: message, ObservedGeneration: 1, LastTransitionTime: now,
			}},
			Protected: &lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: "Stack", Name: target}}},
		}
		list.Items = append(list.Items, l)
	}
	data, err := json.Marshal(&list)
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// lockStoreHeap decodes data as client-go does (the scheme's JSON
// decoder), passes each Lock through transform and adds it to a store
// indexed as NewLockIndex indexes the Lock informer (the
// controller-runtime cache's namespace index and lockguard's four, the
// target and coverage indexes by byTarget and byCoverage), and returns
// the live heap the store then holds per Lock, and the store.
func lockStoreHeap(tb testing.TB, data []byte, transform toolscache.TransformFunc, byTarget, byCoverage toolscache.IndexFunc, newStore func(toolscache.Indexers) toolscache.Indexer) (float64, toolscache.Indexer) {
	tb.Helper()
	return heapOfStore(tb, newStore(toolscache.Indexers{
		toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
		targetIndex:               byTarget, kindIndex: indexByTargetKind, selectorIndex: indexBySelector, coverageIndex: byCoverage,
	}), transform, func() []any {
		locks := decodeLocks(tb, data)
		objs := make([]any, len(locks))
		for i, l := range locks {
			objs[i] = l
		}
		return objs
	})
}

// decodeLocks decodes data, a LockList, as the Lock informer's client
// does, and returns its items as the reflector stores them: each its own
// object.
func decodeLocks(tb testing.TB, data []byte) []*lockv1alpha1.Lock {
	tb.Helper()
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		tb.Fatal(err)
	}
	obj, _, err := serializer.NewCodecFactory(s).UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	list := obj.(*lockv1alpha1.LockList)
	locks := make([]*lockv1alpha1.Lock, len(list.Items))
	for i := range list.Items {
		locks[i] = &list.Items[i]
	}
	return locks
}

// BenchmarkLockCacheHeap reports the live heap per Lock that lockguard's
// Lock informer keeps (the Lock as CacheTransform leaves it, in a store
// with the Lock index's indexes), with no transform, with CacheTransform
// and the target and coverage indexes as they were before compactLock and
// the indexes' buckets ("before"), with compactLock's Lock stored as it
// was before CachedLock ("compact"), as they are in client-go's store
// ("after") and in lockguard's (cachestore.Store, "metastore"), in one
// run; and the live heap per target the metadata cache keeps (a Stack
// with the lock annotation):
//
//	go test -run '^$' -bench LockCacheHeap -benchtime 3x ./internal/readmodel/
func BenchmarkLockCacheHeap(b *testing.B) {
	data := apiServerLocks(b, heapLocks)
	for _, c := range []struct {
		name                 string
		transform            toolscache.TransformFunc
		byTarget, byCoverage toolscache.IndexFunc
	}{
		{"none", func(in any) (any, error) { return in, nil }, indexByTargetBefore, indexByCoverageBefore},
		{"before", transformLockBefore, indexByTargetBefore, indexByCoverageBefore},
		{"compact", nil, indexByTarget, indexByCoverage},
		{"after", nil, indexByTarget, indexByCoverage},
		{"metastore", nil, indexByTarget, indexByCoverage},
	} {
		b.Run(c.name, func(b *testing.B) {
			var sum float64
			for range b.N {
				// A new one each run: its interner starts empty.
				transform := c.transform
				switch c.name {
				case "compact":
					transform = transformLockCompact(newInterner())
				case "after", "metastore":
					transform = CacheTransform(nil, nil)
				}
				newStore := clientGoStore
				if c.name == "metastore" {
					newStore = newMetaIndexer
				}
				per, store := lockStoreHeap(b, data, transform, c.byTarget, c.byCoverage, newStore)
				sum += per
				goruntime.KeepAlive(store)
			}
			b.ReportMetric(sum/float64(b.N), "B/Lock")
		})
	}
	// Each Lock's target, as the metadata cache keeps it: a Stack that
	// carries the lock annotation ("target") and, for a selector Lock's,
	// the label of its own that the Lock's selector matches
	// ("selected-target").
	for _, c := range []struct {
		name     string
		selected bool
	}{{"target", false}, {"selected-target", true}} {
		targets := apiServerTargets(b, heapObjects, true, c.selected)
		b.Run(c.name, func(b *testing.B) {
			var sum float64
			for range b.N {
				per, store := storeHeap(b, targets, CacheTransform(nil, nil), newMetaIndexer)
				sum += per
				goruntime.KeepAlive(store)
			}
			b.ReportMetric(sum/float64(b.N), "B/target")
		})
	}
}

// transformLockBefore is CacheTransform's handling of a Lock before
// compactLock (at d7c5827), kept for BenchmarkLockCacheHeap's comparison
// only.
func transformLockBefore(in any) (any, error) {
	o := in.(*lockv1alpha1.Lock)
	o.Labels, o.Annotations, o.OwnerReferences, o.Finalizers, o.ManagedFields = nil, nil, nil, nil, nil
	return o, nil
}

// transformLockCompact is CacheTransform's handling of a Lock before
// CachedLock (at b5d0fde): compactLock's Lock stored as it is, kept for
// BenchmarkLockCacheHeap's comparison only.
func transformLockCompact(shared *interner) toolscache.TransformFunc {
	return func(in any) (any, error) { return compactLock(in.(*lockv1alpha1.Lock), shared), nil }
}

// indexByTargetBefore is indexByTarget before its buckets (at d7c5827), one
// value per target, kept for BenchmarkLockCacheHeap's comparison only.
func indexByTargetBefore(obj any) ([]string, error) {
	l, ok := obj.(*lockv1alpha1.Lock)
	if !ok {
		return nil, nil
	}
	if key, standing := l.StandingTarget(); standing {
		return []string{key.String()}, nil
	}
	return nil, nil
}

// indexByCoverageBefore is indexByCoverage before its buckets (at
// d7c5827), kept for BenchmarkLockCacheHeap's comparison only.
func indexByCoverageBefore(obj any) ([]string, error) {
	l, ok := obj.(*lockv1alpha1.Lock)
	if !ok || !l.HasSelector() || !l.Standing() {
		return nil, nil
	}
	return coverageKeys(l.Namespace, l.Spec.Selector), nil
}
