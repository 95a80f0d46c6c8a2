package readmodel

import (
	"slices"
	"sync/atomic"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ClusterLabelKeys are the label keys that the cache keeps of a
// cluster-scoped object besides HasLocksLabel (CacheTransform): those
// that the selectors of the live selector ClusterLocks read. The leader's
// ClusterLock reconciler sets them at each pass, before it lists what the
// selectors match, so that a cached object's labels say whether a live
// selector matches it, and a label change that brings it into one is seen
// (controller/clusterwatch.go). Of every other label of a cluster-scoped
// object the cache keeps nothing (issue 38: memory grows with every
// cached object, docs/limits.md), and the kept labels are shared label
// sets (interner): an object that carries one selector label costs a
// pointer more.
//
// An object is transformed with the keys of the moment it arrives: one
// cached before a key was set lacks that key until its next update. The
// pass that set the key lists every object it may have missed from the
// API server. The zero value keeps no key; safe for concurrent use.
type ClusterLabelKeys struct {
	keys atomic.Pointer[[]string]
}

// Set makes keys (in any order, repeated or not) the keys kept from now
// on, and reports whether they differ from those kept before.
func (k *ClusterLabelKeys) Set(keys []string) bool {
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	if old := k.keys.Load(); old != nil && slices.Equal(*old, keys) || old == nil && len(keys) == 0 {
		return false
	}
	k.keys.Store(&keys)
	return true
}

// Keys returns the keys kept, sorted; nil when none (or k is nil).
func (k *ClusterLabelKeys) Keys() []string {
	if k == nil {
		return nil
	}
	if p := k.keys.Load(); p != nil && len(*p) > 0 {
		return *p
	}
	return nil
}

// clusterLabels returns, of the labels l of a cluster-scoped object, those
// the cache keeps: HasLocksLabel and the labels of keys; nil for none, l
// itself when it holds nothing else.
func clusterLabels(l map[string]string, keys []string) map[string]string {
	return keptLabels(l, []string{lockv1alpha1.HasLocksLabel}, keys)
}
