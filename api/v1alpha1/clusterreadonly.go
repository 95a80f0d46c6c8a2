package v1alpha1

import "time"

// ReadOnly ClusterLocks (docs/contract.md rules 16 and 22): a live
// ClusterLock of level ReadOnly freezes its target's spec and metadata as
// a ReadOnly Lock freezes what it covers (in Audit enforcement, rule 20,
// it only warns of the updates it would refuse). lockguard keeps
// ReadOnlyLabel on such a target (put on with ClusterLockedLabel by the
// ClusterLock's create, kept and removed by the reconciler), and the
// chart's cluster-update entry selects on it, so an update of a
// cluster-scoped object under no ReadOnly ClusterLock never calls
// lockguard.

// ReadOnlyAt reports whether the ClusterLock, live at t, is ReadOnly: its
// target then carries ReadOnlyLabel, and its updates reach lockguard,
// which refuses them (Enforces) or warns of them (Audit), as for a
// ReadOnly Lock.
func (c *ClusterLock) ReadOnlyAt(t time.Time) bool {
	return c.Spec.Level == LevelReadOnly && c.Live(t)
}

// ClusterTargetLabels are the labels lockguard keeps on the target of a
// ClusterLock live at t, each "true": ClusterLockedLabel, and
// ReadOnlyLabel when it is ReadOnly (ReadOnlyAt). The create's pending
// mark derives them here.
func (c *ClusterLock) ClusterTargetLabels(t time.Time) []string {
	if c.ReadOnlyAt(t) {
		return []string{ClusterLockedLabel, ReadOnlyLabel}
	}
	return []string{ClusterLockedLabel}
}
