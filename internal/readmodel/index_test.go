package readmodel

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func newLock(ns, name, apiVersion, kind, target string) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: target}},
	}
}

// lockSource is an in-memory Lock API for an informer: it lists its Locks,
// then sends what the test sends on its watch.
type lockSource struct {
	locks   []lockv1alpha1.Lock
	watcher *watch.FakeWatcher
}

func (s *lockSource) List(metav1.ListOptions) (runtime.Object, error) {
	// Copies, as decoded: the cache's transform changes the selectors and
	// conditions of the Locks it is given.
	items := make([]lockv1alpha1.Lock, len(s.locks))
	for i := range s.locks {
		s.locks[i].DeepCopyInto(&items[i])
	}
	return &lockv1alpha1.LockList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: items}, nil
}
func (s *lockSource) Watch(metav1.ListOptions) (watch.Interface, error) { return s.watcher, nil }

// IsWatchListSemanticsUnSupported makes the reflector list, then watch.
func (s *lockSource) IsWatchListSemanticsUnSupported() bool { return true }

// startIndex returns NewLockIndex on a client-go informer of src with
// lockguard's cache transform (CacheTransform: it stores CachedLocks),
// started and synced; it stops at the end of the test.
func startIndex(t *testing.T, src *lockSource) *LockIndex {
	t.Helper()
	return startIndexWith(t, src, CacheTransform(nil, nil))
}

// startIndexWith is startIndex with transform.
func startIndexWith(t testing.TB, src *lockSource, transform toolscache.TransformFunc) *LockIndex {
	t.Helper()
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	// The namespace index, as controller-runtime's informers have it, and
	// the informer lockguard's cache builds (its store a cachestore.Store).
	inf := NewInformerFunc(transform, nil)(src, &lockv1alpha1.Lock{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(transform); err != nil {
		t.Fatal(err)
	}
	informers := &informertest.FakeInformers{Scheme: s, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		lockv1alpha1.GroupVersion.WithKind("Lock"): inf,
	}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	index, err := NewLockIndex(ctx, informers)
	if err != nil {
		t.Fatal(err)
	}
	if index.HasSynced() {
		t.Error("HasSynced() before the informer ran")
	}
	if _, err := index.LiveLocks(lockv1alpha1.TargetKey{}); err != ErrNotSynced {
		t.Errorf("LiveLocks(...) before sync: error %v, want %v", err, ErrNotSynced)
	}
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), index.HasSynced) {
		t.Fatal("the Lock informer did not sync")
	}
	return index
}

// TestLockIndex checks the lookup the webhook and the reconciler share: the
// namespace, the group, the kind and the name must all match, the version
// does not matter, and only live Locks count, as they change.
func TestLockIndex(t *testing.T) {
	src := &lockSource{watcher: watch.NewFake(), locks: []lockv1alpha1.Lock{
		*newLock("forge", "a", "", "Stack", "forge"),
		*newLock("forge", "b", "core.navique.com/v1beta1", "Stack", "forge"),
		*newLock("forge", "other-name", "", "Stack", "other"),
		*newLock("forge", "other-kind", "", "PostgresCluster", "forge"),
		*newLock("elsewhere", "other-ns", "", "Stack", "forge"),
		*newLock("forge", "other-group", "apps/v1", "Stack", "forge"),
		*newLock("forge", "on-a-lock", "", "Lock", "forge"),
	}}
	index := startIndex(t, src)
	forge := lockv1alpha1.TargetKey{Namespace: "forge", Group: "core.navique.com", Kind: "Stack", Name: "forge"}
	lookup := func() []string {
		locks, err := index.LiveLocks(forge)
		if err != nil {
			t.Fatal(err)
		}
		names := []string{}
		for _, l := range locks {
			names = append(names, l.Name)
		}
		slices.Sort(names)
		return names
	}
	if diff := cmp.Diff([]string{"a", "b"}, lookup()); diff != "" {
		t.Errorf("LiveLocks(forge): -want, +got:\n%s", diff)
	}

	// A Lock being deleted leaves the index; a new one enters it.
	deleting := newLock("forge", "a", "", "Stack", "forge")
	deleting.ResourceVersion, deleting.DeletionTimestamp, deleting.Finalizers = "2", &metav1.Time{Time: time.Now()}, []string{"example.com/keep"}
	src.watcher.Modify(deleting)
	src.watcher.Add(newLock("forge", "c", "", "Stack", "forge"))
	want := []string{"b", "c"}
	deadline := time.Now().Add(10 * time.Second)
	for got := lookup(); !cmp.Equal(want, got); got = lookup() {
		if time.Now().After(deadline) {
			t.Fatalf("LiveLocks(forge) after the changes: %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLockIndexByKind checks the reads of the cluster guards: the live
// Locks of one target kind in every namespace, and the first few live
// Locks with their count, as Locks are added, change kind, start being
// deleted and go.
func TestLockIndexByKind(t *testing.T) {
	src := &lockSource{watcher: watch.NewFake(), locks: []lockv1alpha1.Lock{
		*newLock("forge", "a", "", "Stack", "forge"),
		*newLock("forge", "b", "core.navique.com/v1beta1", "Stack", "other"),
		*newLock("elsewhere", "c", "", "Stack", "forge"),
		*newLock("elsewhere-2", "d", "", "Stack", "forge"),
		*newLock("forge", "p", "", "PostgresCluster", "db"),
		*newLock("forge", "other-group", "apps/v1", "Stack", "forge"),
		*newLock("forge", "on-a-lock", "", "Lock", "forge"),
	}}
	stopping := newLock("forge", "stopping", "", "Stack", "forge")
	stopping.DeletionTimestamp, stopping.Finalizers = &metav1.Time{Time: time.Now()}, []string{"example.com/keep"}
	src.locks = append(src.locks, *stopping)
	index := startIndex(t, src)
	stack := schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}
	postgres := schema.GroupKind{Group: lockv1alpha1.Group, Kind: "PostgresCluster"}

	names := func(locks []lockv1alpha1.Lock) []string {
		out := []string{}
		for _, l := range locks {
			out = append(out, l.Namespace+"/"+l.Name)
		}
		return out
	}
	ofKind := func(gk schema.GroupKind) []string {
		locks, err := index.LiveLocksOfKind(gk)
		if err != nil {
			t.Fatal(err)
		}
		out := names(locks)
		slices.Sort(out)
		return out
	}
	type anyLocks struct {
		Names []string
		Total int
	}
	anyOf := func(limit int) anyLocks {
		locks, total, err := index.AnyLiveLocks(limit)
		if err != nil {
			t.Fatal(err)
		}
		return anyLocks{names(locks), total}
	}
	type state struct {
		Stack, Postgres, Widget, Apps []string
		Any0, Any2, Any10             anyLocks
	}
	now := func() state {
		return state{
			Stack: ofKind(stack), Postgres: ofKind(postgres), Widget: ofKind(schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Widget"}),
			Apps: ofKind(schema.GroupKind{Group: "apps", Kind: "Stack"}),
			Any0: anyOf(0), Any2: anyOf(2), Any10: anyOf(10),
		}
	}
	// Not live, hence in no answer: a Lock being deleted, one on another
	// group, one on a Lock. "elsewhere-2/d" sorts before "elsewhere/c", as
	// the API server lists them.
	want := state{
		Stack:    []string{"elsewhere-2/d", "elsewhere/c", "forge/a", "forge/b"},
		Postgres: []string{"forge/p"},
		Widget:   []string{},
		Apps:     []string{},
		Any0:     anyLocks{Names: []string{}, Total: 5},
		Any2:     anyLocks{Names: []string{"elsewhere-2/d", "elsewhere/c"}, Total: 5},
		Any10:    anyLocks{Names: []string{"elsewhere-2/d", "elsewhere/c", "forge/a", "forge/b", "forge/p"}, Total: 5},
	}
	if diff := cmp.Diff(want, now()); diff != "" {
		t.Errorf("LiveLocksOfKind and AnyLiveLocks: -want, +got:\n%s", diff)
	}

	// forge/a moves to PostgresCluster, forge/b starts being deleted,
	// forge/p and elsewhere-2/d go, a Widget Lock comes.
	moved := newLock("forge", "a", "", "PostgresCluster", "db")
	moved.ResourceVersion = "2"
	src.watcher.Modify(moved)
	leaving := newLock("forge", "b", "core.navique.com/v1beta1", "Stack", "other")
	leaving.ResourceVersion, leaving.DeletionTimestamp, leaving.Finalizers = "2", &metav1.Time{Time: time.Now()}, []string{"example.com/keep"}
	src.watcher.Modify(leaving)
	src.watcher.Delete(newLock("forge", "p", "", "PostgresCluster", "db"))
	src.watcher.Delete(newLock("elsewhere-2", "d", "", "Stack", "forge"))
	src.watcher.Add(newLock("forge", "w", "", "Widget", "w"))
	want = state{
		Stack:    []string{"elsewhere/c"},
		Postgres: []string{"forge/a"},
		Widget:   []string{"forge/w"},
		Apps:     []string{},
		Any0:     anyLocks{Names: []string{}, Total: 3},
		Any2:     anyLocks{Names: []string{"elsewhere/c", "forge/a"}, Total: 3},
		Any10:    anyLocks{Names: []string{"elsewhere/c", "forge/a", "forge/w"}, Total: 3},
	}
	deadline := time.Now().Add(10 * time.Second)
	for got := now(); !cmp.Equal(want, got); got = now() {
		if time.Now().After(deadline) {
			t.Fatalf("LiveLocksOfKind and AnyLiveLocks after the changes: -want, +got:\n%s", cmp.Diff(want, got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLockIndexByKindNotSynced: before the informer has synced, the
// cluster guards' reads say so rather than answer "no Locks".
func TestLockIndexByKindNotSynced(t *testing.T) {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	inf := toolscache.NewSharedIndexInformer(&lockSource{watcher: watch.NewFake()}, &lockv1alpha1.Lock{}, 0, toolscache.Indexers{})
	index, err := NewLockIndex(context.Background(), &informertest.FakeInformers{Scheme: s, InformersByGVK: map[schema.GroupVersionKind]toolscache.SharedIndexInformer{
		lockv1alpha1.GroupVersion.WithKind("Lock"): inf,
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := index.LiveLocksOfKind(schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}); err != ErrNotSynced {
		t.Errorf("LiveLocksOfKind(...) before sync: error %v, want %v", err, ErrNotSynced)
	}
	if _, _, err := index.AnyLiveLocks(10); err != ErrNotSynced {
		t.Errorf("AnyLiveLocks(10) before sync: error %v, want %v", err, ErrNotSynced)
	}
}

// TestCompareLocks: compareLocks orders as "namespace/name" strings do.
func TestCompareLocks(t *testing.T) {
	keys := [][2]string{{"a", "x"}, {"a", "y"}, {"a-b", "x"}, {"a0", "x"}, {"ab", "a"}, {"b", "a"}, {"a", "x-1"}}
	for _, p := range keys {
		for _, q := range keys {
			a, b := newLock(p[0], p[1], "", "Stack", "s"), newLock(q[0], q[1], "", "Stack", "s")
			if got, want := compareLocks(lockName(a), lockName(b)), strings.Compare(p[0]+"/"+p[1], q[0]+"/"+q[1]); got != want {
				t.Errorf("compareLocks(%s/%s, %s/%s) = %d, want %d", p[0], p[1], q[0], q[1], got, want)
			}
		}
	}
}

// TestLockIndexBuckets: the target index holds Locks by bucket (more Locks
// than buckets here, so that buckets are shared), and a lookup keeps of
// its bucket the Locks of its target alone, those that differ only by
// namespace, kind or group included.
func TestLockIndexBuckets(t *testing.T) {
	n := indexBuckets + 1000
	src := &lockSource{watcher: watch.NewFake()}
	for i := range n {
		target := fmt.Sprintf("stack-%05d", i)
		src.locks = append(src.locks, *newLock("forge", "l-"+target, "", "Stack", target))
		if i%100 == 0 {
			src.locks = append(src.locks,
				*newLock("elsewhere", "l-"+target, "", "Stack", target),
				*newLock("forge", "kind-"+target, "", "PostgresCluster", target),
				*newLock("forge", "group-"+target, "apps/v1", "Stack", target))
		}
	}
	index := startIndex(t, src)
	if buckets := len(index.informer.GetIndexer().ListIndexFuncValues(targetIndex)); buckets >= n {
		t.Fatalf("%d buckets for %d targets: none is shared", buckets, n)
	}
	for i := range n + 10 {
		target := fmt.Sprintf("stack-%05d", i)
		locks, err := index.LiveLocks(lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: target})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, l := range locks {
			names = append(names, l.Namespace+"/"+l.Name)
		}
		var want []string
		if i < n {
			want = []string{"forge/l-" + target}
		}
		if diff := cmp.Diff(want, names); diff != "" {
			t.Fatalf("LiveLocks(forge Stack %s): -want, +got:\n%s", target, diff)
		}
		key := lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: target}
		if named, err := index.Names(key); err != nil || named != (i < n) {
			t.Fatalf("Names(forge Stack %s) = %t, %v; want %t", target, named, err, i < n)
		}
	}
	// Every new object's lookup (objectEvents.idle) reads a bucket of a
	// few Locks: into a pooled slice, allocating nothing (except under the
	// race detector, whose pool drops slices: raceDetector).
	for _, target := range []string{"stack-00001", "stack-99999"} {
		key := lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: target}
		if allocs := testing.AllocsPerRun(100, func() { _, _ = index.Names(key) }); allocs != 0 && !raceDetector {
			t.Errorf("Names(forge Stack %s) allocates %v times, want none", target, allocs)
		}
	}
}

// TestPutLookup: a slice given back to the pool holds no Lock, beyond its
// length either.
func TestPutLookup(t *testing.T) {
	p := takeLookup()
	*p = append(*p, "a", "b", "c", "d")
	*p = (*p)[:1]
	putLookup(p)
	if len(*p) != 0 || slices.ContainsFunc((*p)[:cap(*p)], func(o any) bool { return o != nil }) {
		t.Errorf("the pooled slice holds %v", (*p)[:cap(*p)])
	}
}
