package readmodel

import (
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// CacheTransform returns the transform of lockguard's informer cache: it
// drops from each object, before it is stored, what neither the webhook nor
// the reconciler reads, so that memory grows with the Locks and targets,
// not with what other tools write on them (last-applied
// annotations, managedFields often several kilobytes).
//
//   - A target or a namespace (metadata only) keeps its name, namespace,
//     resourceVersion, deletionTimestamp, the lock annotation, the
//     protected-pending annotation and the has-locks label: the reconciler
//     patches those alone. A namespaced object (a target) keeps the
//     labels labelKeys keep (LabelKeys: lockguard's own and those the
//     selector Locks of its namespace read, docs/contract.md rule 15; nil
//     keeps all); a cluster-scoped one (a namespace, or an
//     object of a kind a live selector ClusterLock names) only the
//     has-locks label and the labels of clusterKeys (ClusterLabelKeys:
//     those live selector ClusterLocks read; nil keeps none). For the owner
//     index (OwnerIndex) and the cascade guard it also keeps its UID, its
//     owner references (without their controller and blockOwnerDeletion
//     flags) and, of its finalizers, only the garbage collector's
//     (orphan, foregroundDeletion). It is stored as a Meta, which keeps
//     that alone.
//   - A Lock adds the keys its selector reads to labelKeys, and keeps its metadata but labels, annotations, owner references,
//     finalizers and managedFields, and its spec and status, its repeated
//     strings shared (trimLock), in a CachedLock, which reads as that
//     trimmed Lock.
//   - Anything else loses its managedFields.
//
// The labels, the owner references' apiVersion and kind and the
// finalizers kept are shared between the objects that repeat them
// (interner): a cached object is read-only.
func CacheTransform(clusterKeys *ClusterLabelKeys, labelKeys *LabelKeys) toolscache.TransformFunc {
	shared := newInterner()
	return func(in any) (any, error) {
		switch o := in.(type) {
		case *metav1.PartialObjectMetadata:
			trimMetadata(o, shared, clusterKeys, labelKeys)
			return newMeta(o, shared), nil
		case *lockv1alpha1.Lock:
			// Its keys before the Lock index holds it (LabelKeys).
			labelKeys.observe(o)
			// Trimmed on a copy on the stack, which the CachedLock does
			// not keep.
			c := *o
			trimLock(&c, shared)
			return newCachedLock(&c), nil
		default:
			// Nil-checked, see https://github.com/kubernetes/kubernetes/issues/124337.
			if obj, err := meta.Accessor(in); err == nil && obj.GetManagedFields() != nil {
				obj.SetManagedFields(nil)
			}
		}
		return in, nil
	}
}

// trimMetadata drops from o what the cache does not keep (CacheTransform)
// and shares its owner references' apiVersion and kind (newMeta shares
// its labels).
func trimMetadata(o *metav1.PartialObjectMetadata, shared *interner, clusterKeys *ClusterLabelKeys, labelKeys *LabelKeys) {
	o.Annotations = keptAnnotations(o.Annotations)
	o.GenerateName = ""
	if o.Namespace == "" {
		// A cluster-scoped object keeps the labels clusterKeys name; a
		// namespaced one those labelKeys keep of its namespace.
		o.Labels = clusterLabels(o.Labels, clusterKeys.Keys())
	} else {
		o.Labels = labelKeys.labelsOf(o.Namespace, o.Labels)
	}
	for i := range o.OwnerReferences {
		r := &o.OwnerReferences[i]
		r.Controller, r.BlockOwnerDeletion = nil, nil
		r.APIVersion, r.Kind = shared.string(r.APIVersion), shared.string(r.Kind)
	}
	if o.OwnerReferences = slices.Clip(o.OwnerReferences); len(o.OwnerReferences) == 0 {
		o.OwnerReferences = nil
	}
	o.Finalizers = gcFinalizers(o.Finalizers)
	o.ManagedFields = nil
}

// keptAnnotations returns, of a, the annotations the reconciler reads
// (cachedAnnotations); nil for none. a itself
// is returned when it holds nothing else.
func keptAnnotations(a map[string]string) map[string]string {
	n := 0
	for _, k := range cachedAnnotations {
		if _, ok := a[k]; ok {
			n++
		}
	}
	switch {
	case n == 0:
		return nil
	case n == len(a):
		return a
	}
	kept := make(map[string]string, n)
	for _, k := range cachedAnnotations {
		if v, ok := a[k]; ok {
			kept[k] = v
		}
	}
	return kept
}

// cachedAnnotations are the annotations the cache keeps of an object: the
// names of its Locks and lockguard's pending marks.
var cachedAnnotations = []string{lockv1alpha1.LockedAnnotation, lockv1alpha1.ProtectedPendingAnnotation, lockv1alpha1.HasLocksPendingAnnotation}

// gcFinalizers returns, of fs, the garbage collector's finalizers
// (orphan, foregroundDeletion), as the package's constants: nil for none.
func gcFinalizers(fs []string) []string {
	var kept []string
	for _, f := range fs {
		switch f {
		case metav1.FinalizerOrphanDependents:
			kept = append(kept, metav1.FinalizerOrphanDependents)
		case metav1.FinalizerDeleteDependents:
			kept = append(kept, metav1.FinalizerDeleteDependents)
		}
	}
	return kept
}
