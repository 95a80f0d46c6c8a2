package readmodel

import (
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// SelectorLocksCovering returns the names of the live selector Locks that
// cover at least one of objs (Lock.Covers), all of one namespace: the same
// object with its old and new labels, for a relabelling. It copies no
// Lock and reads only the selector Locks the objects' labels could match
// (coverageIndex); nil before the informer has synced (the Locks' own
// events come once it has).
func (x *LockIndex) SelectorLocksCovering(objs ...lockv1alpha1.Object) []types.NamespacedName {
	if len(objs) == 0 || !x.HasSynced() {
		return nil
	}
	var keys []types.NamespacedName
	seen := map[any]bool{}
	for _, obj := range objs {
		if obj.Namespace != objs[0].Namespace {
			continue
		}
		err := x.eachSelectorLock(obj, func(l any) {
			if !seen[l] {
				seen[l] = true
				keys = append(keys, lockName(l))
			}
		})
		if err != nil {
			return nil
		}
	}
	return keys
}
