package cachestore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// ownerIndex indexes objects by their owners' UIDs, as lockguard's owner
// index does.
const ownerIndex = "owner"

func indexByOwner(obj any) ([]string, error) {
	var uids []string
	for _, r := range obj.(metav1.Object).GetOwnerReferences() {
		uids = append(uids, string(r.UID))
	}
	slices.Sort(uids)
	return slices.Compact(uids), nil
}

// storeIndexers are the indexers of a metadata informer in lockguard
// (controller-runtime's namespace index and an owner index), and one more
// that indexes some objects under several values.
func storeIndexers() toolscache.Indexers {
	return toolscache.Indexers{
		toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
		ownerIndex:                indexByOwner,
		"labels": func(obj any) ([]string, error) {
			var vs []string
			for k, v := range obj.(metav1.Object).GetLabels() {
				vs = append(vs, k+"="+v)
			}
			return vs, nil
		},
	}
}

// randomMeta returns one of a few hundred objects (namespace and name), in
// one of several versions: owners, labels and resourceVersion vary.
func randomMeta(r *rand.Rand) *metav1.PartialObjectMetadata {
	i := r.IntN(300)
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: []string{"", "a", "b", "c"}[i%4], Name: fmt.Sprintf("o-%d", i/4),
		UID:             types.UID(fmt.Sprintf("1c9e3b7a-5d2f-4e8a-9b6c-%012d", i)),
		ResourceVersion: fmt.Sprint(r.IntN(1000) + 1),
	}}
	switch r.IntN(4) {
	case 0:
		o.OwnerReferences = []metav1.OwnerReference{{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "p", UID: types.UID(fmt.Sprintf("1c9e3b7a-5d2f-4e8a-9b6c-%012d", r.IntN(5)))}}
	case 1:
		o.OwnerReferences = []metav1.OwnerReference{{Kind: "Stack", Name: "p", UID: "odd"}, {Kind: "Stack", Name: "q", UID: types.UID(fmt.Sprintf("u%d", r.IntN(3)))}}
	}
	if r.IntN(2) == 0 {
		o.Labels = map[string]string{"tier": fmt.Sprint(r.IntN(3)), "app": fmt.Sprint(r.IntN(2))}
	}
	return o
}

// otherObject is an object of a second type: a Store's index sets keep
// pointers while its objects are of one type, and widen when another
// comes.
type otherObject struct{ metav1.ObjectMeta }

// TestStoreAgrees: a Store and client-go's indexer, given the same
// random changes (adds, updates, deletes by object and by tombstone,
// replacements, indexers added to a filled store; in the last runs,
// objects of a second type from halfway), answer every read alike.
func TestStoreAgrees(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for run := range 12 {
		indexers := storeIndexers()
		late := toolscache.Indexers{"late": indexers["labels"]}
		if run%2 == 1 {
			// The owner index is added later, as OwnerIndex adds it.
			late = toolscache.Indexers{ownerIndex: indexByOwner}
			delete(indexers, ownerIndex)
		}
		want := toolscache.NewIndexer(toolscache.DeletionHandlingMetaNamespaceKeyFunc, indexers)
		got := New(indexers)
		for step := range 400 {
			randomMeta := func(r *rand.Rand) metav1.Object {
				o := randomMeta(r)
				if run >= 8 && step >= 200 && r.IntN(4) == 0 {
					return &otherObject{o.ObjectMeta}
				}
				return o
			}
			var op string
			switch n := r.IntN(100); {
			case n < 50:
				op = "add"
				o := randomMeta(r)
				mustAgree(t, want.Add(o), got.Add(o))
			case n < 65:
				op = "update"
				o := randomMeta(r)
				mustAgree(t, want.Update(o), got.Update(o))
			case n < 80:
				op = "delete"
				o := randomMeta(r)
				mustAgree(t, want.Delete(o), got.Delete(o))
			case n < 90:
				op = "tombstone"
				o := randomMeta(r)
				key, _ := toolscache.DeletionHandlingMetaNamespaceKeyFunc(o)
				tomb := toolscache.DeletedFinalStateUnknown{Key: key, Obj: o}
				mustAgree(t, want.Delete(tomb), got.Delete(tomb))
			case n < 92:
				op = "replace"
				var list []any
				for range r.IntN(200) {
					list = append(list, randomMeta(r))
				}
				mustAgree(t, want.Replace(list, "77"), got.Replace(list, "77"))
			case n < 93 && late != nil:
				op = "add indexers"
				mustAgree(t, want.AddIndexers(late), got.AddIndexers(late))
				late = nil
			default:
				op = "bookmark"
				want.Bookmark("88")
				got.Bookmark("88")
			}
			if diff := storeDiff(want, got, r); diff != "" {
				t.Fatalf("run %d, step %d (%s): the stores disagree (-client-go, +Store):\n%s", run, step, op, diff)
			}
		}
		if got.wide != (run >= 8) {
			t.Errorf("run %d: the Store's index sets are wide: %t; want %t", run, got.wide, run >= 8)
		}
	}
}

func mustAgree(t *testing.T, want, got error) {
	t.Helper()
	if (want == nil) != (got == nil) {
		t.Fatalf("client-go's store: %v; Store: %v", want, got)
	}
}

// storeDiff compares every read of the two stores.
func storeDiff(want, got toolscache.Indexer, r *rand.Rand) string {
	sorted := func(l []any) []string {
		var keys []string
		for _, o := range l {
			m := o.(metav1.Object)
			keys = append(keys, fmt.Sprintf("%s/%s@%s %p", m.GetNamespace(), m.GetName(), m.GetResourceVersion(), o))
		}
		slices.Sort(keys)
		return keys
	}
	strs := func(l []string, err error) []string {
		l = slices.Clone(l)
		slices.Sort(l)
		if err != nil {
			l = append(l, "error")
		}
		return l
	}
	objs := func(l []any, err error) []string {
		s := sorted(l)
		if err != nil {
			s = append(s, "error")
		}
		return s
	}
	var d string
	add := func(what string, a, b any) {
		if diff := cmp.Diff(a, b); diff != "" {
			d += what + ":\n" + diff
		}
	}
	add("List", sorted(want.List()), sorted(got.List()))
	add("ListKeys", strs(want.ListKeys(), nil), strs(got.ListKeys(), nil))
	add("LastStoreSyncResourceVersion", want.LastStoreSyncResourceVersion(), got.LastStoreSyncResourceVersion())
	probe := randomMeta(r)
	key, _ := toolscache.MetaNamespaceKeyFunc(probe)
	for _, k := range []string{key, "a/o-1", "o-2", "nope/x"} {
		w, wok, werr := want.GetByKey(k)
		g, gok, gerr := got.GetByKey(k)
		add("GetByKey "+k, fmt.Sprintf("%p %v %v", w, wok, werr != nil), fmt.Sprintf("%p %v %v", g, gok, gerr != nil))
	}
	w, wok, _ := want.Get(probe)
	g, gok, _ := got.Get(probe)
	add("Get", fmt.Sprintf("%p %v", w, wok), fmt.Sprintf("%p %v", g, gok))
	for name := range want.GetIndexers() {
		add("ListIndexFuncValues "+name, strs(want.ListIndexFuncValues(name), nil), strs(got.ListIndexFuncValues(name), nil))
		add("Index "+name, objs(want.Index(name, probe)), objs(got.Index(name, probe)))
		for _, v := range append(want.ListIndexFuncValues(name), "none") {
			add("ByIndex "+name+" "+v, objs(want.ByIndex(name, v)), objs(got.ByIndex(name, v)))
			add("IndexKeys "+name+" "+v, strs(want.IndexKeys(name, v)), strs(got.IndexKeys(name, v)))
			// EachIndexed and AppendIndexed read a Store in place and
			// client-go's store through ByIndex: both as ByIndex.
			for which, store := range map[string]toolscache.Indexer{"Store": got, "client-go's store": want} {
				var each []any
				err := EachIndexed(store, name, v, func(o metav1.Object) { each = append(each, o) })
				add("EachIndexed of "+which+" "+name+" "+v, objs(want.ByIndex(name, v)), objs(each, err))
				wantObjs, _ := want.ByIndex(name, v)
				found, err := AnyIndexed(store, name, v)
				add("AnyIndexed of "+which+" "+name+" "+v, fmt.Sprint(len(wantObjs) > 0, false), fmt.Sprint(found, err != nil))
				appended, err := AppendIndexed([]any{"kept"}, store, name, v)
				if len(appended) == 0 || appended[0] != "kept" {
					d += "AppendIndexed of " + which + " did not keep what dst held\n"
				} else {
					add("AppendIndexed of "+which+" "+name+" "+v, objs(want.ByIndex(name, v)), objs(appended[1:], err))
				}
			}
		}
	}
	// AppendIndexedValues reads several values at once, as ByIndex of
	// each in turn.
	for name := range want.GetIndexers() {
		values := append(want.ListIndexFuncValues(name), "none")
		slices.Sort(values)
		var concat []any
		for _, v := range values {
			objs, _ := want.ByIndex(name, v)
			concat = append(concat, objs...)
		}
		for which, store := range map[string]toolscache.Indexer{"Store": got, "client-go's store": want} {
			appended, err := AppendIndexedValues([]any{"kept"}, store, name, values...)
			if len(appended) == 0 || appended[0] != "kept" {
				d += "AppendIndexedValues of " + which + " did not keep what dst held\n"
				continue
			}
			add("AppendIndexedValues of "+which+" "+name, objs(concat, nil), objs(appended[1:], err))
		}
	}
	_, err := AppendIndexedValues(nil, got, "missing", "x", "y")
	add("AppendIndexedValues of a missing index", true, err != nil)
	add("indexers", slices.Sorted(mapKeys(want.GetIndexers())), slices.Sorted(mapKeys(got.GetIndexers())))
	_, werr := want.ByIndex("missing", "x")
	_, gerr := got.ByIndex("missing", "x")
	add("ByIndex of a missing index", werr != nil, gerr != nil)
	add("EachIndexed of a missing index", true, EachIndexed(got, "missing", "x", func(metav1.Object) {}) != nil)
	_, err = AppendIndexed(nil, got, "missing", "x")
	add("AppendIndexed of a missing index", true, err != nil)
	_, err = AnyIndexed(got, "missing", "x")
	add("AnyIndexed of a missing index", true, err != nil)
	return d
}

func mapKeys(m toolscache.Indexers) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestObjectSet: an index's set holds each object once, in a slice while
// few and in a map past smallSet, and gives back what it holds.
func TestObjectSet(t *testing.T) {
	var objs []metav1.Object
	for i := range 2*smallSet + 3 {
		objs = append(objs, &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i)}})
	}
	var s objectSet[metav1.Object]
	held := map[metav1.Object]bool{}
	r := rand.New(rand.NewPCG(3, 4))
	for step := range 2000 {
		o := objs[r.IntN(len(objs))]
		if r.IntN(5) == 0 {
			// A new version of o takes its place, if the set holds it.
			n := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: o.GetName()}}
			if got := s.swap(o, n); got != held[o] {
				t.Fatalf("step %d: swap(%s) = %v; want %v", step, o.GetName(), got, held[o])
			}
			if held[o] {
				delete(held, o)
				held[n] = true
				objs[slices.Index(objs, o)] = n
			}
		} else if r.IntN(3) == 0 {
			s.remove(o)
			delete(held, o)
		} else {
			s.add(o)
			held[o] = true
		}
		got := map[metav1.Object]bool{}
		s.each(func(o metav1.Object) {
			if got[o] {
				t.Fatalf("step %d: %s is in the set twice", step, o.GetName())
			}
			got[o] = true
		})
		if len(got) != len(held) || s.len() != len(held) {
			t.Fatalf("step %d: the set holds %d (len %d); want %d", step, len(got), s.len(), len(held))
		}
		for o := range held {
			if !got[o] {
				t.Fatalf("step %d: %s is missing", step, o.GetName())
			}
		}
		if s.many == nil && len(s.few) > smallSet {
			t.Fatalf("step %d: %d objects in the slice; at most %d", step, len(s.few), smallSet)
		}
	}
}

// TestNameTable: a namespace's table of objects by name answers as a map
// of name to object through random puts and removes, growing and
// shrinking, and widening when an object of a second type comes.
func TestNameTable(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var tab nameTable
	want := map[string]metav1.Object{}
	widened := false
	for step := range 20000 {
		// Phases of mostly puts, then of removes, so that the table
		// grows to hundreds and shrinks back.
		name := fmt.Sprint(r.IntN(600))
		if (step/4000)%2 == 0 && r.IntN(4) != 0 {
			var o metav1.Object = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name}}
			if step > 16000 && r.IntN(8) == 0 {
				// Another type: the table widens.
				o, widened = &metav1.ObjectMeta{Name: name}, true
			}
			if got, w := tab.put(o), want[name]; got != w {
				t.Fatalf("step %d: put(%s) replaced %v; want %v", step, name, got, w)
			}
			want[name] = o
		} else {
			if got, w := tab.remove(name), want[name]; got != w {
				t.Fatalf("step %d: remove(%s) = %v; want %v", step, name, got, w)
			}
			delete(want, name)
		}
		if tab.n != len(want) || tab.n*4 > tab.len()*3 || (tab.len() > nameTableMin && tab.n*16 < tab.len()) {
			t.Fatalf("step %d: %d objects (want %d) in %d slots", step, tab.n, len(want), tab.len())
		}
		if wide := tab.wide != nil; wide != widened {
			t.Fatalf("step %d: wide %v", step, wide)
		}
		if step%97 == 0 {
			for i := range 600 {
				name := fmt.Sprint(i)
				if got := tab.get(name); got != want[name] {
					t.Fatalf("step %d: get(%s) = %v; want %v", step, name, got, want[name])
				}
			}
			n := 0
			tab.each(func(metav1.Object) { n++ })
			if n != len(want) {
				t.Fatalf("step %d: each gave %d objects; want %d", step, n, len(want))
			}
		}
	}
}

// TestSplitKey: splitKey answers as client-go's SplitMetaNamespaceKey.
func TestSplitKey(t *testing.T) {
	for _, key := range []string{"", "a", "a/b", "/b", "a/", "/", "a/b/c", "//", "ns/name-1"} {
		wns, wname, werr := toolscache.SplitMetaNamespaceKey(key)
		ns, name, err := splitKey(key)
		if ns != wns || name != wname || (err == nil) != (werr == nil) {
			t.Errorf("splitKey(%q) = %q, %q, %v; want %q, %q, %v", key, ns, name, err, wns, wname, werr)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = splitKey("ns/name") }); n != 0 {
		t.Errorf("splitKey allocates %v times; want 0", n)
	}
}
