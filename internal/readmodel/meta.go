package readmodel

import (
	"iter"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// Meta is what lockguard's cache keeps of an object of a metadata-only
// informer (CacheTransform): its name and namespace, UID,
// resourceVersion, labels, owner references (apiVersion, kind, name,
// UID), and, for the few objects that carry them, the annotations and
// finalizers CacheTransform keeps and deletionTimestamp (issue 38: a
// metav1.PartialObjectMetadata is 288 bytes before its strings, a Meta
// 48 with a name of up to 15 bytes: its IDs, its shape, which the objects
// of a namespace with one owner and the same labels share, and its name's
// bytes, in one allocation made by newMeta only, metaname.go). A UID and a
// resourceVersion of the usual form (a UUID in lower case, a decimal) are
// kept as numbers, any other exactly as written; the labels in one
// string (labelSet: GetLabels makes a map of them, Label reads one).
//
// A Meta is read-only, as every object of the cache, and reads as the
// metav1.PartialObjectMetadata it was made from (Partial, DeepCopyObject),
// less what CacheTransform drops: a cached client's Get and List of
// metav1.PartialObjectMetadata answer with such copies, and the
// controller's sources convert it before their handlers see it. Its
// setters change the fields it keeps; setting one it does not keep
// (generateName, generation, selfLink, creationTimestamp,
// deletionGracePeriodSeconds, managedFields) does nothing.
type Meta struct {
	shape     *metaShape // nil for no namespace, labels, owner or rare part
	objectIDs            // odd ones in the rare part
	// The name follows, in the same allocation (metaname.go).
}

// metaShape is what a Meta has beyond its name and IDs: its namespace,
// labels, owner reference (when it has one whose UID is a canonical
// UUID: most owned objects; any other references are in the rare part)
// and rare part. A shape without a rare part is shared between the Metas
// that repeat it (interner.shape: an owner's objects, or a namespace's
// unowned objects with the same labels), and read-only; a shape with one
// is its Meta's own. It replaced a Meta's namespace and labels pointers
// and a 16-byte part for its owner (issue 38: 80 bytes an owned object
// before; 48 and a share of a shape since where its owner's objects
// repeat their labels, 80 still where each has labels of its own, as in
// benchmarks.md section 9's bench: run AL, 129 bytes an object against
// 130).
type metaShape struct {
	namespace *string   // shared between the objects of a namespace; nil for none
	labels    *labelSet // shared between the objects that repeat it
	owner     *ownerRef // nil for none
	rare      *metaRare
}

// noShape is the shape of a Meta without one: read-only.
var noShape metaShape

// ownerRef is the one owner reference of a Meta: its apiVersion and kind,
// its name and a UID in canonical form. It is read-only, and shared
// between the objects an owner owns (interner.ownerRef: 48 bytes an owned
// object before, 16 since).
type ownerRef struct {
	*ownerKind
	name string
	uid  [16]byte
}

// ownerKind is an owner reference's apiVersion and kind.
type ownerKind struct{ apiVersion, kind string }

var (
	_ metav1.Object  = (*Meta)(nil)
	_ runtime.Object = (*Meta)(nil)
)

// newMeta returns the Meta of o, sharing the namespace through shared;
// o's labels, annotations, finalizers and owner references' apiVersion
// and kind are taken as they are (trimMetadata has trimmed and shared
// them), its labels shared through shared.
func newMeta(o *metav1.PartialObjectMetadata, shared *interner) *Meta {
	s := metaShape{namespace: namespacePtr(o.Namespace, shared), labels: shared.labelSet(o.Labels)}
	m := newMetaNamed(o.Name, &s)
	m.setUID(o.UID, nil, s.oddIDs)
	m.setRV(o.ResourceVersion, nil, s.oddIDs)
	if len(o.Annotations) > 0 {
		s.more().annotations = pairsOf(o.Annotations)
	}
	if len(o.Finalizers) > 0 {
		s.moreRest().finalizers = o.Finalizers
	}
	if o.DeletionTimestamp != nil {
		s.moreRest().deletionTimestamp = o.DeletionTimestamp
	}
	s.setOwnerReferences(o.OwnerReferences, shared)
	m.shape = shared.shape(s)
	return m
}

// Partial returns the object m stands for, as a new
// metav1.PartialObjectMetadata of kind gvk that shares nothing with m.
func (m *Meta) Partial(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		Labels: m.shapeOf().labels.toMap(), Annotations: m.GetAnnotations(),
		Finalizers: slices.Clone(m.GetFinalizers()), OwnerReferences: m.GetOwnerReferences(),
	}}
	if t := m.GetDeletionTimestamp(); t != nil {
		p.DeletionTimestamp = t.DeepCopy()
	}
	if !gvk.Empty() {
		p.SetGroupVersionKind(gvk)
	}
	return p
}

// AsPartial returns obj as a metav1.PartialObjectMetadata of kind gvk when
// it is a *Meta (a copy, Partial), a client-go tombstone of one likewise,
// and obj itself otherwise.
func AsPartial(obj any, gvk schema.GroupVersionKind) any {
	switch o := obj.(type) {
	case *Meta:
		return o.Partial(gvk)
	case toolscache.DeletedFinalStateUnknown:
		if m, ok := o.Obj.(*Meta); ok {
			o.Obj = m.Partial(gvk)
		}
		return o
	}
	return obj
}

// DeepCopyObject returns the metav1.PartialObjectMetadata m stands for,
// without its kind (Partial): what a cached client's reads copy into the
// caller's object.
func (m *Meta) DeepCopyObject() runtime.Object { return m.Partial(schema.GroupVersionKind{}) }

// GetObjectKind returns an empty kind: a Meta does not keep its kind (its
// informer has one).
func (m *Meta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// GetNamespace returns the namespace.
func (m *Meta) GetNamespace() string {
	if ns := m.shapeOf().namespace; ns != nil {
		return *ns
	}
	return ""
}

// SetNamespace sets the namespace.
func (m *Meta) SetNamespace(namespace string) { m.edit().namespace = namespacePtr(namespace, nil) }

// GetGenerateName returns "": not kept.
func (m *Meta) GetGenerateName() string { return "" }

// SetGenerateName does nothing: not kept.
func (m *Meta) SetGenerateName(string) {}

// GetUID returns the UID.
func (m *Meta) GetUID() types.UID {
	return m.getUID(m.odd())
}

// SetUID sets the UID.
func (m *Meta) SetUID(uid types.UID) {
	m.setUID(uid, m.odd(), func() *oddIDs { return &m.moreRest().oddIDs })
}

// GetResourceVersion returns the resourceVersion.
func (m *Meta) GetResourceVersion() string {
	return m.getRV(m.odd())
}

// SetResourceVersion sets the resourceVersion.
func (m *Meta) SetResourceVersion(version string) {
	m.setRV(version, m.odd(), func() *oddIDs { return &m.moreRest().oddIDs })
}

// GetGeneration returns 0: not kept.
func (m *Meta) GetGeneration() int64 { return 0 }

// SetGeneration does nothing: not kept.
func (m *Meta) SetGeneration(int64) {}

// GetSelfLink returns "": not kept.
func (m *Meta) GetSelfLink() string { return "" }

// SetSelfLink does nothing: not kept.
func (m *Meta) SetSelfLink(string) {}

// GetCreationTimestamp returns the zero time: not kept.
func (m *Meta) GetCreationTimestamp() metav1.Time { return metav1.Time{} }

// SetCreationTimestamp does nothing: not kept.
func (m *Meta) SetCreationTimestamp(metav1.Time) {}

// GetDeletionTimestamp returns the deletionTimestamp (the cache's: read-only).
func (m *Meta) GetDeletionTimestamp() *metav1.Time {
	if m.restOf() == nil {
		return nil
	}
	return m.restOf().deletionTimestamp
}

// SetDeletionTimestamp sets the deletionTimestamp.
func (m *Meta) SetDeletionTimestamp(t *metav1.Time) {
	if t != nil || m.restOf() != nil {
		m.moreRest().deletionTimestamp = t
	}
}

// GetDeletionGracePeriodSeconds returns nil: not kept.
func (m *Meta) GetDeletionGracePeriodSeconds() *int64 { return nil }

// SetDeletionGracePeriodSeconds does nothing: not kept.
func (m *Meta) SetDeletionGracePeriodSeconds(*int64) {}

// GetLabels returns the labels, as a new map (nil for none): a Meta keeps
// them in a labelSet.
func (m *Meta) GetLabels() map[string]string { return m.shapeOf().labels.toMap() }

// Label returns the value of the label key, and whether m has it,
// without GetLabels' map.
func (m *Meta) Label(key string) (string, bool) { return m.shapeOf().labels.get(key) }

// Labels yields m's labels, in the order of their keys, without GetLabels'
// map.
func (m *Meta) Labels() iter.Seq2[string, string] { return m.shapeOf().labels.all() }

// LabelsOf returns what o's labels are read from without a map of them
// where o keeps none: o itself when it is a *Meta (Label), its labels'
// map otherwise. A loop that matches every cached object of a namespace
// against a selector (the reconciler's pass of a selector Lock) reads
// them this way: GetLabels made a map per object and per Lock, the
// start's largest garbage at 100,000 Locks and a million objects.
func LabelsOf(o metav1.Object) lockv1alpha1.LabelReader {
	if m, ok := o.(*Meta); ok {
		return m
	}
	return lockv1alpha1.LabelMap(o.GetLabels())
}

// SetLabels sets the labels.
func (m *Meta) SetLabels(labels map[string]string) { m.edit().labels = newLabelSet(labels) }

// GetFinalizers returns the finalizers (the cache's: read-only).
func (m *Meta) GetFinalizers() []string {
	if m.restOf() == nil {
		return nil
	}
	return m.restOf().finalizers
}

// SetFinalizers sets the finalizers.
func (m *Meta) SetFinalizers(finalizers []string) {
	if len(finalizers) > 0 || m.restOf() != nil {
		m.moreRest().finalizers = finalizers
	}
}

// GetOwnerReferences returns the owner references, as a new slice (nil
// for none).
func (m *Meta) GetOwnerReferences() []metav1.OwnerReference {
	if r := m.ownerOf(); r != nil {
		return []metav1.OwnerReference{{APIVersion: r.apiVersion, Kind: r.kind, Name: r.name, UID: types.UID(cachestore.FormatUUID(r.uid))}}
	}
	if m.restOf() != nil && m.restOf().owners != nil {
		return slices.Clone(m.restOf().owners)
	}
	return nil
}

// ownerUIDs returns the UIDs of the owner references, as strings.
func (m *Meta) ownerUIDs() []string {
	if r := m.ownerOf(); r != nil {
		return []string{cachestore.FormatUUID(r.uid)}
	}
	if m.restOf() == nil || m.restOf().owners == nil {
		return nil
	}
	uids := make([]string, len(m.restOf().owners))
	for i, r := range m.restOf().owners {
		uids[i] = string(r.UID)
	}
	return uids
}

// SetOwnerReferences sets the owner references (without their controller
// and blockOwnerDeletion flags).
func (m *Meta) SetOwnerReferences(refs []metav1.OwnerReference) {
	m.edit().setOwnerReferences(refs, nil)
}

// setOwnerReferences sets s's owner references: a single one with a
// canonical UID as the owner (its apiVersion, kind and name shared
// through shared, when not nil), any others as rare.owners.
func (s *metaShape) setOwnerReferences(refs []metav1.OwnerReference, shared *interner) {
	s.owner = nil
	if s.rare != nil && s.rare.rest != nil {
		s.rare.rest.owners = nil
	}
	if len(refs) == 0 {
		return
	}
	if uid, ok := cachestore.ParseUUID(string(refs[0].UID)); ok && len(refs) == 1 {
		r := refs[0]
		s.owner = &ownerRef{ownerKind: &ownerKind{apiVersion: r.APIVersion, kind: r.Kind}, name: r.Name, uid: uid}
		if shared != nil {
			s.owner = shared.ownerRef(r.APIVersion, r.Kind, r.Name, uid)
		}
		return
	}
	kept := make([]metav1.OwnerReference, len(refs))
	for i, r := range refs {
		kept[i] = metav1.OwnerReference{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID}
	}
	s.moreRest().owners = kept
}

// GetManagedFields returns nil: not kept.
func (m *Meta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }

// SetManagedFields does nothing: not kept.
func (m *Meta) SetManagedFields([]metav1.ManagedFieldsEntry) {}

// shapeOf returns m's shape (noShape for none): read-only.
func (m *Meta) shapeOf() *metaShape {
	if m.shape == nil {
		return &noShape
	}
	return m.shape
}

// edit returns m's shape to change: its own already when it has a rare
// part, a copy of it otherwise (a shape without one may be shared).
func (m *Meta) edit() *metaShape {
	if m.shape != nil && m.shape.rare != nil {
		return m.shape
	}
	s := new(metaShape)
	if m.shape != nil {
		*s = *m.shape
	}
	m.shape = s
	return s
}

// ownerOf returns m's owner reference, nil when it has not one with a
// canonical UID (any other references are in the rare part).
func (m *Meta) ownerOf() *ownerRef { return m.shapeOf().owner }
