package readmodel

import (
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestMetaRoundTrip: a Meta reads as exactly the metadata it was made
// from (of the fields it keeps), whatever form its UIDs and
// resourceVersion take: a UID or resourceVersion of the usual form is
// kept as a number, any other (a forged owner reference's UID, an API
// server's opaque version) exactly as written.
func TestMetaRoundTrip(t *testing.T) {
	now := metav1.Now()
	const uuid = "1c9e3b7a-5d2f-4e8a-9b6c-000000000042"
	owner := metav1.OwnerReference{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "root", UID: "0b1a2c3d-4e5f-6071-8293-a4b5c6d7e8f9"}
	cases := map[string]metav1.ObjectMeta{
		"Usual":         {Name: "web", Namespace: "forge", UID: uuid, ResourceVersion: "918273", Labels: map[string]string{"tier": "web"}, OwnerReferences: []metav1.OwnerReference{owner}},
		"ClusterScoped": {Name: "forge", UID: uuid, ResourceVersion: "1"},
		"Empty":         {Name: "x"},
		"UpperCaseUID":  {Name: "x", Namespace: "ns", UID: "1C9E3B7A-5D2F-4E8A-9B6C-000000000042", ResourceVersion: "5"},
		"ZeroUUID":      {Name: "x", Namespace: "ns", UID: "00000000-0000-0000-0000-000000000000"},
		"OddUID":        {Name: "x", Namespace: "ns", UID: "uid-x"},
		"OpaqueRV":      {Name: "x", Namespace: "ns", UID: uuid, ResourceVersion: "v1:abc"},
		"LeadingZeroRV": {Name: "x", Namespace: "ns", UID: uuid, ResourceVersion: "007"},
		"ZeroRV":        {Name: "x", Namespace: "ns", UID: uuid, ResourceVersion: "0"},
		"HugeRV":        {Name: "x", Namespace: "ns", UID: uuid, ResourceVersion: "184467440737095516150"},
		"ForgedOwnerUID": {Name: "x", Namespace: "ns", UID: uuid, OwnerReferences: []metav1.OwnerReference{
			owner, {APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "other", UID: "not-a-uuid"},
		}},
		"Rare": {Name: "x", Namespace: "ns", UID: uuid, ResourceVersion: "9", DeletionTimestamp: &now,
			Annotations: map[string]string{"core.navique.com/locked": "a"}, Finalizers: []string{metav1.FinalizerDeleteDependents},
			OwnerReferences: []metav1.OwnerReference{owner, {APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: uuid}}},
	}
	gvk := schema.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"}
	for name, om := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: *om.DeepCopy()}, newInterner())
			want := &metav1.PartialObjectMetadata{ObjectMeta: om}
			want.SetGroupVersionKind(gvk)
			if diff := cmp.Diff(want, m.Partial(gvk)); diff != "" {
				t.Errorf("Partial: -want, +got:\n%s", diff)
			}
			if got := m.GetUID(); got != om.UID {
				t.Errorf("GetUID() = %q; want %q", got, om.UID)
			}
			if got := m.GetResourceVersion(); got != om.ResourceVersion {
				t.Errorf("GetResourceVersion() = %q; want %q", got, om.ResourceVersion)
			}
			var wantOwners []string
			for _, r := range om.OwnerReferences {
				wantOwners = append(wantOwners, string(r.UID))
			}
			if diff := cmp.Diff(wantOwners, m.ownerUIDs(), cmp.Comparer(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
				t.Errorf("ownerUIDs: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestMetaCopies: what Partial and DeepCopyObject return shares nothing
// with the cache (a caller may change its copy), and GetOwnerReferences
// returns a new slice each time.
func TestMetaCopies(t *testing.T) {
	in := metav1.ObjectMeta{Name: "x", Namespace: "ns", Labels: map[string]string{"a": "1"}, Annotations: map[string]string{"core.navique.com/locked": "l"},
		Finalizers: []string{metav1.FinalizerOrphanDependents}, OwnerReferences: []metav1.OwnerReference{{Kind: "Stack", Name: "o", UID: "odd"}}}
	m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: in}, newInterner())
	p := m.DeepCopyObject().(*metav1.PartialObjectMetadata)
	p.Labels["a"], p.Annotations["core.navique.com/locked"], p.Finalizers[0], p.OwnerReferences[0].Name = "2", "m", "f", "p"
	m.GetOwnerReferences()[0].Name = "q"
	if diff := cmp.Diff(&metav1.PartialObjectMetadata{ObjectMeta: *in.DeepCopy()}, m.DeepCopyObject()); diff != "" {
		t.Errorf("the cached Meta changed with its copies: -want, +got:\n%s", diff)
	}
}

// TestMetaSetters: a Meta's setters change what it keeps, back to the
// usual forms, and do nothing for what it does not keep.
func TestMetaSetters(t *testing.T) {
	m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", UID: "odd", ResourceVersion: "opaque"}}, newInterner())
	m.SetUID("1c9e3b7a-5d2f-4e8a-9b6c-000000000042")
	m.SetResourceVersion("12")
	m.SetNamespace("ns")
	m.SetLabels(map[string]string{"a": "b"})
	m.SetGeneration(3)
	m.SetCreationTimestamp(metav1.Now())
	m.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: types.UID("1c9e3b7a-5d2f-4e8a-9b6c-000000000043")}})
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", UID: "1c9e3b7a-5d2f-4e8a-9b6c-000000000042", ResourceVersion: "12",
		Labels: map[string]string{"a": "b"}, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "1c9e3b7a-5d2f-4e8a-9b6c-000000000043"}}}}
	if diff := cmp.Diff(want, m.DeepCopyObject()); diff != "" {
		t.Errorf("after the setters: -want, +got:\n%s", diff)
	}
	if m.restOf().uid != "" || m.restOf().rv != "" {
		t.Errorf("the odd UID and version are still held: %+v", *m.restOf())
	}
}

// TestAsPartial: handlers see a Meta, and a tombstone of one, as a
// PartialObjectMetadata of the informer's kind; anything else as it is.
func TestAsPartial(t *testing.T) {
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge"}}, newInterner())
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge"}}
	want.SetGroupVersionKind(gvk)
	if diff := cmp.Diff(any(want), AsPartial(m, gvk)); diff != "" {
		t.Errorf("AsPartial(Meta): -want, +got:\n%s", diff)
	}
	tomb := toolscache.DeletedFinalStateUnknown{Key: "forge", Obj: m}
	if diff := cmp.Diff(any(toolscache.DeletedFinalStateUnknown{Key: "forge", Obj: want}), AsPartial(tomb, gvk)); diff != "" {
		t.Errorf("AsPartial(tombstone): -want, +got:\n%s", diff)
	}
	other := &metav1.PartialObjectMetadata{}
	if got := AsPartial(other, gvk); got != any(other) {
		t.Errorf("AsPartial(%T) = %v; want it unchanged", other, got)
	}
}

// TestMetaSharesOwner: the objects one owner owns share its reference's
// apiVersion, kind and name (issue 38: an owned object's reference is a
// pointer and a UID, not three strings of its own) and their namespace,
// as one shape; a Meta of a short name stays in Go's 48-byte size class, a shape and a
// rare part in the 32-byte one; and a setter of a Meta changes no Meta that shares
// its shape.
func TestMetaSharesOwner(t *testing.T) {
	if size := unsafe.Sizeof(metaTail[[16]byte]{}); size > 48 {
		t.Errorf("a Meta with a name of up to 15 bytes is %d bytes; want at most 48", size)
	}
	if size := unsafe.Sizeof(metaShape{}); size > 32 {
		t.Errorf("a metaShape is %d bytes; want at most 32", size)
	}
	if size := unsafe.Sizeof(metaRare{}); size > 32 {
		t.Errorf("a metaRare (a target's lock annotation) is %d bytes; want at most 32", size)
	}
	shared := newInterner()
	ref := func() []metav1.OwnerReference {
		// Strings of their own, as a decoder makes them.
		return []metav1.OwnerReference{{APIVersion: strings.Clone("core.navique.com/v1alpha1"), Kind: strings.Clone("Stack"),
			Name: strings.Clone("stack-0000010"), UID: "1c9e3b7a-5d2f-4e8a-9b6c-000000000010"}}
	}
	a := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", OwnerReferences: ref()}}, shared)
	b := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", OwnerReferences: ref()}}, shared)
	if a.ownerOf() == nil || b.ownerOf() == nil {
		t.Fatalf("a single owner reference with a canonical UID is not the Meta's owner: %+v, %+v", a.ownerOf(), b.ownerOf())
	}
	if a.ownerOf().ownerKind != b.ownerOf().ownerKind {
		t.Errorf("the two references' apiVersion and kind are not shared")
	}
	if a.shape != b.shape {
		t.Errorf("the two objects' shape (namespace, labels, owner) is not shared")
	}
	if unsafe.StringData(a.ownerOf().name) != unsafe.StringData(b.ownerOf().name) {
		t.Errorf("the two references' owner name is not shared")
	}
	if a.ownerOf() != b.ownerOf() {
		t.Errorf("the two objects of one owner do not share its reference")
	}
	if diff := cmp.Diff(ref(), b.GetOwnerReferences()); diff != "" {
		t.Errorf("GetOwnerReferences: -want, +got:\n%s", diff)
	}
	// A reference to the same UID under another name is not the shared
	// one; and changing a Meta's owner changes no other Meta.
	other := ref()
	other[0].Name = "stack-renamed"
	c := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", OwnerReferences: other}}, shared)
	if diff := cmp.Diff(other, c.GetOwnerReferences()); diff != "" {
		t.Errorf("GetOwnerReferences of another name: -want, +got:\n%s", diff)
	}
	a.SetOwnerReferences(nil)
	a.SetNamespace("elsewhere")
	a.SetLabels(map[string]string{"app": "a"})
	a.SetAnnotations(map[string]string{lockv1alpha1.LockedAnnotation: "true"})
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", OwnerReferences: ref()}}
	if diff := cmp.Diff(want, b.Partial(schema.GroupVersionKind{})); diff != "" {
		t.Errorf("b after a's setters: -want, +got:\n%s", diff)
	}
	b.SetOwnerReferences(other)
	if a.GetOwnerReferences() != nil {
		t.Errorf("GetOwnerReferences after SetOwnerReferences(nil): %v", a.GetOwnerReferences())
	}
	if diff := cmp.Diff(other, b.GetOwnerReferences()); diff != "" {
		t.Errorf("GetOwnerReferences after SetOwnerReferences: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff(other, c.GetOwnerReferences()); diff != "" {
		t.Errorf("another Meta's references after SetOwnerReferences: -want, +got:\n%s", diff)
	}
}

// TestLabelsOf: a Meta's labels are read in place (LabelsOf gives the
// Meta itself), so that matching it against a selector allocates nothing;
// another object's are read from its map; both decide as the map does.
func TestLabelsOf(t *testing.T) {
	lbls := map[string]string{"app": "web", "tier": "db"}
	m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: lbls}}, newInterner())
	p := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Labels: lbls}}
	if _, ok := LabelsOf(m).(*Meta); !ok {
		t.Errorf("LabelsOf(a *Meta) is a %T, want the *Meta", LabelsOf(m))
	}
	sels := []lockv1alpha1.LockSelector{
		{MatchLabels: map[string]string{"app": "web"}},
		{MatchLabels: map[string]string{"app": "api"}},
		{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: lockv1alpha1.SelectorOpNotIn, Values: []string{"db"}}}},
		{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "zone", Operator: lockv1alpha1.SelectorOpDoesNotExist}}},
	}
	for _, s := range sels {
		want := s.Matches("Stack", lbls)
		for _, o := range []metav1.Object{m, p} {
			if got := s.MatchesLabels("Stack", LabelsOf(o)); got != want {
				t.Errorf("%T: MatchesLabels(%+v) = %v, want the map's %v", o, s, got, want)
			}
		}
	}
	got := map[string]string{}
	for k, v := range LabelsOf(m).Labels() {
		got[k] = v
	}
	if diff := cmp.Diff(lbls, got); diff != "" {
		t.Errorf("a Meta's Labels (-map +yielded):\n%s", diff)
	}
	s := sels[0]
	if n := testing.AllocsPerRun(100, func() { s.MatchesLabels("Stack", LabelsOf(m)) }); n != 0 {
		t.Errorf("matching a Meta against a selector allocates %v times, want none", n)
	}
}

// TestAnnotationOf: AnnotationOf reads what GetAnnotations gives, of a
// Meta (in place, allocating nothing) and of another object.
func TestAnnotationOf(t *testing.T) {
	for _, a := range []map[string]string{nil, {lockv1alpha1.LockedAnnotation: "a,b"}, {lockv1alpha1.LockedAnnotation: "", lockv1alpha1.ProtectedPendingAnnotation: "x"}} {
		p := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", Annotations: a}}
		m := newMeta(p.DeepCopy(), newInterner())
		for _, o := range []metav1.Object{m, p} {
			for _, k := range []string{lockv1alpha1.LockedAnnotation, lockv1alpha1.ProtectedPendingAnnotation, "other"} {
				v, ok := AnnotationOf(o, k)
				w, wok := o.GetAnnotations()[k]
				if v != w || ok != wok {
					t.Errorf("%T with %v: AnnotationOf(%q) = %q, %t; GetAnnotations has %q, %t", o, a, k, v, ok, w, wok)
				}
			}
		}
		if n := testing.AllocsPerRun(100, func() { AnnotationOf(m, lockv1alpha1.LockedAnnotation) }); n != 0 {
			t.Errorf("AnnotationOf a Meta allocates %v times, want none", n)
		}
	}
}

// TestMetaName: a Meta's name, in its allocation or in its rare part,
// reads as it was made and set, in every size of allocation; setting it
// changes no string read before.
func TestMetaName(t *testing.T) {
	if off := unsafe.Offsetof(metaTail[[16]byte]{}.tail); off != metaSize {
		t.Fatalf("a name's bytes begin at %d in a metaTail; want %d, where the Meta's fields end", off, metaSize)
	}
	shared := newInterner()
	for _, n := range []int{0, 1, 8, 15, 16, 31, 32, 47, 63, 64, 95, 127, 191, 192, 253, 254, 255, 300, 1000} {
		name := strings.Repeat("n", n)
		m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: strings.Clone(name), Namespace: "ns"}}, shared)
		if got := m.GetName(); got != name {
			t.Fatalf("a Meta made with a name of %d bytes reads a name of %d: %q", n, len(got), got)
		}
		if got := m.Partial(schema.GroupVersionKind{}).Name; got != name {
			t.Fatalf("the Partial of a Meta named with %d bytes is named with %d", n, len(got))
		}
		if (n > maxInlineName) != (m.restOf() != nil) {
			t.Errorf("a name of %d bytes: in the rare part %v; want %v", n, m.restOf() != nil, n > maxInlineName)
		}
		before := m.GetName()
		m.SetName("other")
		if m.GetName() != "other" || before != name {
			t.Errorf("after SetName(other) of a Meta named with %d bytes: GetName %q, the name read before %d bytes", n, m.GetName(), len(before))
		}
		if got := m.GetNamespace(); got != "ns" {
			t.Errorf("after SetName, the namespace is %q", got)
		}
	}
}
