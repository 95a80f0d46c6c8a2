package v1alpha1

import (
	"reflect"
	"slices"
)

// What a ReadOnly Lock freezes (docs/contract.md rule 16): the rule is written
// here once, and the update guard (webhook/update.go) and anything else
// that must tell a frozen change from a free one derive from it.

// ignoredTopLevel are the members of an object that an UPDATE may change
// under a ReadOnly Lock: status (the status subresource never reaches the
// update guard; this covers kinds served without one) and metadata, which
// FrozenChange compares on its own.
var ignoredTopLevel = []string{"status", "metadata"}

// ignoredMetadata are the members of metadata that the API server, not the
// caller, sets on every write.
var ignoredMetadata = []string{"resourceVersion", "generation", "managedFields"}

// FrozenChange reports whether an UPDATE of an object from old to new
// changes what a ReadOnly Lock freezes, and, if so, the path of the first
// field that changed (in the order of the members' names, so that the
// same change always names the same field): every member of the object
// but status (spec, and any other top-level member such as data), and its
// metadata, except
//
//   - resourceVersion, generation and managedFields, which the API server
//     sets;
//   - lockguard's own annotation, LockedAnnotation (its reconciler keeps it;
//     a hand edit never unprotects anything, rule 2) and the namespace
//     guard's label, HasLocksLabel;
//   - ReadOnlyLabel, when it is added or kept: removing it, or changing its
//     value from "true", is a frozen change. The label is what makes the
//     API server send the object's updates to lockguard at all (the update
//     guard's objectSelector): a caller allowed to remove it could change
//     anything in the next update, before the reconciler puts it back.
//     lockguard's reconciler, which removes it when no ReadOnly Lock covers
//     the object any more, is an exempt principal.
//
// oldObj and newObj are the objects as JSON decodes them (map[string]any); a
// member absent from one and empty or null in the other is unchanged only
// for labels and annotations. FrozenChange is pure: it reads its arguments
// and changes neither.
func FrozenChange(oldObj, newObj map[string]any) (path string, changed bool) {
	for _, k := range unionKeys(oldObj, newObj) {
		if slices.Contains(ignoredTopLevel, k) {
			continue
		}
		if !reflect.DeepEqual(oldObj[k], newObj[k]) {
			return k, true
		}
	}
	oldMeta, _ := oldObj["metadata"].(map[string]any)
	newMeta, _ := newObj["metadata"].(map[string]any)
	for _, k := range unionKeys(oldMeta, newMeta) {
		switch {
		case slices.Contains(ignoredMetadata, k):
		case k == "annotations":
			if p, ch := stringMapChange("metadata.annotations", oldMeta[k], newMeta[k], LockedAnnotation); ch {
				return p, true
			}
		case k == "labels":
			if p, ch := labelsChange(oldMeta[k], newMeta[k]); ch {
				return p, true
			}
		case !reflect.DeepEqual(oldMeta[k], newMeta[k]):
			return "metadata." + k, true
		}
	}
	return "", false
}

// labelsChange is FrozenChange of metadata.labels: every label but
// HasLocksLabel and ReadOnlyLabel, and ReadOnlyLabel's removal.
func labelsChange(oldLabels, newLabels any) (string, bool) {
	if p, ch := stringMapChange("metadata.labels", oldLabels, newLabels, ReadOnlyLabel, HasLocksLabel); ch {
		return p, true
	}
	o, _ := oldLabels.(map[string]any)
	n, _ := newLabels.(map[string]any)
	if v, had := o[ReadOnlyLabel]; had && v == "true" && n[ReadOnlyLabel] != "true" {
		return "metadata.labels[" + ReadOnlyLabel + "]", true
	}
	return "", false
}

// stringMapChange reports whether the maps oldMap and newMap (labels or
// annotations as JSON decodes them; absent, null and {} are all empty)
// differ in a key other than ignored, and the path of the first such key.
func stringMapChange(path string, oldMap, newMap any, ignored ...string) (string, bool) {
	o, oOK := oldMap.(map[string]any)
	n, nOK := newMap.(map[string]any)
	if (oldMap != nil && !oOK) || (newMap != nil && !nOK) {
		// Not a map: a malformed object, compared as it is.
		if !reflect.DeepEqual(oldMap, newMap) {
			return path, true
		}
		return "", false
	}
	for _, k := range unionKeys(o, n) {
		if slices.Contains(ignored, k) {
			continue
		}
		ov, inOld := o[k]
		nv, inNew := n[k]
		if inOld != inNew || !reflect.DeepEqual(ov, nv) {
			return path + "[" + k + "]", true
		}
	}
	return "", false
}

// unionKeys returns the keys of a and b, sorted, each once.
func unionKeys(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
