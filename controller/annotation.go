package controller

import (
	"encoding/json"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// annotationValue is the LockedAnnotation value for these Locks: their
// names, sorted and comma-separated; "" when there are none.
func annotationValue(locks []lockv1alpha1.Lock) string {
	names := make([]string, 0, len(locks))
	for _, l := range locks {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return strings.Join(names, ",")
}

// annotationPatch is a JSON merge patch that sets LockedAnnotation to value,
// or removes it when value is "", and touches nothing else. It is written
// out rather than computed from the cached object: the cache keeps only
// this annotation of a target, so a diff against it could not tell the
// target's other annotations apart from absent ones (removing the last
// cached key would patch "annotations": null and drop them all).
func annotationPatch(value string) client.Patch {
	var v any
	if value != "" {
		v = value
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{lockv1alpha1.LockedAnnotation: v}}})
	return client.RawPatch(types.MergePatchType, data)
}
