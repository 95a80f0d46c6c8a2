package controller

import (
	"slices"
	"strings"

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

// annotationLists reports whether a LockedAnnotation value names the Lock.
func annotationLists(value, lockName string) bool {
	for name := range strings.SplitSeq(value, ",") {
		if name == lockName {
			return true
		}
	}
	return false
}
