package readmodel

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// listLW lists list (a namespace's items alone for a field selector,
// once release is closed) and watches nothing.
type listLW struct {
	list    func() runtime.Object
	release chan struct{} // nil: namespace lists answer at once
}

func (l *listLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *listLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

func (l *listLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	all := l.list()
	if opts.FieldSelector == "" {
		return all, nil
	}
	if l.release != nil {
		select {
		case <-l.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	ns := opts.FieldSelector[len("metadata.namespace="):]
	out := &metav1.PartialObjectMetadataList{ListMeta: all.(*metav1.PartialObjectMetadataList).ListMeta}
	for _, o := range all.(*metav1.PartialObjectMetadataList).Items {
		if o.Namespace == ns {
			out.Items = append(out.Items, o)
		}
	}
	return out, nil
}

// IsWatchListSemanticsUnSupported: it lists, and streams nothing.
func (l *listLW) IsWatchListSemanticsUnSupported() bool { return true }

func (l *listLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

func selectorLock(ns, name string, keys ...string) *lockv1alpha1.Lock {
	l := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"}, Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{keys[0]: "db"}}}}
	for _, k := range keys[1:] {
		l.Spec.Selector.MatchExpressions = append(l.Spec.Selector.MatchExpressions, lockv1alpha1.LabelSelectorRequirement{Key: k, Operator: lockv1alpha1.SelectorOpExists})
	}
	return l
}

func labelsAt(t *testing.T, inf toolscache.SharedIndexInformer, key string) map[string]string {
	t.Helper()
	obj, ok, err := inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		t.Fatalf("%s not stored: %v", key, err)
	}
	return obj.(metav1.Object).GetLabels()
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestLabelKeys: the metadata informers list once the Lock informer has
// synced, keeping of a namespaced object lockguard's labels and the keys
// the selector Locks of its namespace read; a Lock on a new key makes its
// namespace incomplete (Complete, Keeps) until its objects are stored
// again with that key, and leaves the other namespaces complete.
func TestLabelKeys(t *testing.T) {
	keys := NewLabelKeys()
	transform := CacheTransform(nil, keys)
	objects := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []metav1.PartialObjectMetadata{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x", UID: "ux", ResourceVersion: "5", Labels: map[string]string{"tier": "db", "zone": "eu", "other": "1", lockv1alpha1.ReadOnlyLabel: "true"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "y", UID: "uy", ResourceVersion: "6", Labels: map[string]string{"tier": "db", "zone": "eu"}}},
	}}
	metaLW := &listLW{list: func() runtime.Object { return objects.DeepCopy() }, release: make(chan struct{})}
	lockLW := &listLW{list: func() runtime.Object {
		return &lockv1alpha1.LockList{ListMeta: metav1.ListMeta{ResourceVersion: "9"}, Items: []lockv1alpha1.Lock{*selectorLock("a", "db", "tier")}}
	}}
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc}
	metas := NewInformerFunc(transform, keys)(metaLW, &metav1.PartialObjectMetadata{}, 0, indexers)
	locks := NewInformerFunc(transform, keys)(lockLW, &lockv1alpha1.Lock{}, 0, indexers)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go metas.RunWithContext(ctx)
	time.Sleep(100 * time.Millisecond)
	if metas.HasSynced() {
		t.Fatal("the metadata informer listed before the Lock informer had synced")
	}
	go locks.RunWithContext(ctx)
	waitFor(t, "the metadata informer's sync", metas.HasSynced)

	want := map[string]string{"tier": "db", lockv1alpha1.ReadOnlyLabel: "true"}
	if diff := cmp.Diff(want, labelsAt(t, metas, "a/x")); diff != "" {
		t.Errorf("labels kept of a/x, whose namespace's Lock reads tier (-want +got):\n%s", diff)
	}
	if got := labelsAt(t, metas, "b/y"); len(got) != 0 {
		t.Errorf("labels kept of b/y, whose namespace has no Lock: %v, want none", got)
	}
	if !keys.Complete("a") || keys.refreshing() != 0 {
		t.Fatalf("after the first lists: namespace a complete %v, %d refreshing; want complete, none", keys.Complete("a"), keys.refreshing())
	}

	// A Lock on a new key, as the Lock informer's watch brings it.
	gen, _ := keys.Generation("a")
	zone := selectorLock("a", "zone", "tier", "zone")
	if _, err := transform(zone.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if now, complete := keys.Generation("a"); complete || now == gen {
		t.Errorf("namespace a at generation %d (complete %v) while its objects are being stored again with a key added at %d; want incomplete, a new generation", now, complete, gen)
	}
	if !keys.Complete("b") {
		t.Error("namespace b incomplete: no Lock of it changed")
	}
	if diff := cmp.Diff(want, labelsAt(t, metas, "a/x")); diff != "" {
		t.Errorf("a/x before its refresh (-want +got):\n%s", diff)
	}
	close(metaLW.release)
	waitFor(t, "namespace a refreshed", func() bool { return keys.Complete("a") })
	want["zone"] = "eu"
	if diff := cmp.Diff(want, labelsAt(t, metas, "a/x")); diff != "" {
		t.Errorf("a/x after its refresh (-want +got):\n%s", diff)
	}
	if !keys.Keeps("a", []lockv1alpha1.Lock{*zone}) {
		t.Error("Keeps of namespace a's Locks: false, want true")
	}
	if keys.Keeps("a", []lockv1alpha1.Lock{*selectorLock("a", "new", "region")}) {
		t.Error("Keeps of a Lock on keys not kept: true, want false")
	}
	if keys.Keeps("b", []lockv1alpha1.Lock{*selectorLock("b", "new", "tier")}) {
		t.Error("Keeps of a Lock of b on tier, kept only in a: true, want false")
	}
	waitFor(t, "the refresh's end", func() bool { return keys.refreshing() == 0 })
}

// TestLabelKeysNil: without LabelKeys the cache keeps every label of a
// namespaced object, and every namespace is complete.
func TestLabelKeysNil(t *testing.T) {
	var keys *LabelKeys
	l := map[string]string{"a": "1", "b": "2"}
	if got := keys.labelsOf("ns", l); !cmp.Equal(got, l) {
		t.Errorf("labels kept: %v, want %v", got, l)
	}
	if !keys.Complete("ns") || !keys.Keeps("ns", []lockv1alpha1.Lock{*selectorLock("ns", "l", "a")}) {
		t.Error("a nil LabelKeys is incomplete")
	}
}
