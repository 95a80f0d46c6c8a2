package controller

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// annotationValue is the LockedAnnotation value for the Locks of these
// names: sorted, without repeats, comma-separated; "" when there are none.
// names is left as it is.
func annotationValue(names []string) string {
	names = slices.Compact(slices.Sorted(slices.Values(names)))
	return strings.Join(names, ",")
}

// lockNames returns the names of locks, in their order.
func lockNames(locks []lockv1alpha1.Lock) []string {
	names := make([]string, len(locks))
	for i := range locks {
		names[i] = locks[i].Name
	}
	return names
}

// enforcingNames returns the names of the Locks of locks that refuse at
// now (Lock.Enforcing, the one rule the guards decide by too), in their
// order: the annotation names only those, so that an audit Lock
// (docs/contract.md rule 20) makes no guard deny, policy mode's
// ValidatingAdmissionPolicy included. Names, not copies of the Locks: a
// pass over every target at start made one per Lock.
func enforcingNames(locks []lockv1alpha1.Lock, now time.Time) []string {
	var names []string
	for i := range locks {
		if locks[i].Enforcing(now) {
			names = append(names, locks[i].Name)
		}
	}
	return names
}

// metadataPatch is a JSON merge patch that sets LockedAnnotation to
// annotation, or removes it when annotation is "", and, when label is set,
// puts ReadOnlyLabel=true on (*label true) or takes it off (false), makes
// protected's change of ProtectedLabel and ProtectedPendingAnnotation, and
// touches nothing else: one write for all, so that a target whose Locks
// change costs one patch. It is written out rather than computed from the
// cached object: the cache keeps only this annotation of a target, so a
// diff against it could not tell the target's other annotations apart
// from absent ones (removing the last cached key would patch
// "annotations": null and drop them all). A patch that takes the
// protected label or its pending mark off is made at resourceVersion rv,
// the version judged (the cache's): a Lock create's label and mark
// written since make the API server refuse it (Conflict), rather than be
// undone (guardedRemoval).
func metadataPatch(annotation string, label *bool, protected protectedChange, rv string) client.Patch {
	var v any
	if annotation != "" {
		v = annotation
	}
	annotations := map[string]any{lockv1alpha1.LockedAnnotation: v}
	meta := map[string]any{"annotations": annotations}
	labels := map[string]any{}
	if label != nil {
		labels[lockv1alpha1.ReadOnlyLabel] = labelValue(*label)
	}
	if protected.label != nil {
		labels[lockv1alpha1.ProtectedLabel] = labelValue(*protected.label)
	}
	if len(labels) > 0 {
		meta["labels"] = labels
	}
	if protected.clearPending {
		annotations[lockv1alpha1.ProtectedPendingAnnotation] = nil
	}
	if protected.clearPending || (protected.label != nil && !*protected.label) {
		meta["resourceVersion"] = rv
	}
	data, _ := json.Marshal(map[string]any{"metadata": meta})
	return client.RawPatch(types.MergePatchType, data)
}

// labelValue is a merge patch's value of a label that is "true" when on,
// and removed (null) when off.
func labelValue(on bool) any {
	if on {
		return "true"
	}
	return nil
}

// readOnlyCovered reports whether any of locks is a ReadOnly Lock: the
// object they cover must carry ReadOnlyLabel.
func readOnlyCovered(locks []lockv1alpha1.Lock) bool {
	for _, l := range locks {
		if l.Spec.Level == lockv1alpha1.LevelReadOnly {
			return true
		}
	}
	return false
}

// labelChange returns the change of ReadOnlyLabel that an object with
// labels needs when want says whether ReadOnly Locks cover it: nil when
// none (it carries the label with the value "true" exactly when wanted).
func labelChange(labels map[string]string, want bool) *bool {
	v, has := labels[lockv1alpha1.ReadOnlyLabel]
	if want == (has && v == "true") && (want || !has) {
		return nil
	}
	return &want
}
