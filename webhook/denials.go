package webhook

import (
	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// DenialRecorder records the requests Locks and ClusterLocks refuse, for
// their status.lastDenied (in lockguard, internal/denials). Its methods
// must not block: they are called on the admission path.
type DenialRecorder interface {
	// RecordDenial records that locks refused the request denied (its
	// Count is ignored).
	RecordDenial(locks []lockv1alpha1.Lock, denied lockv1alpha1.DeniedRequest)
	// RecordClusterDenial records that the ClusterLocks locks refused the
	// request denied (its Count is ignored).
	RecordClusterDenial(locks []lockv1alpha1.ClusterLock, denied lockv1alpha1.DeniedRequest)
}

// recordDenial hands r the refusal denied by locks and by the ClusterLocks
// cluster, each kind when there are some.
func recordDenial(r DenialRecorder, locks []lockv1alpha1.Lock, cluster []lockv1alpha1.ClusterLock, denied lockv1alpha1.DeniedRequest) {
	if len(locks) > 0 {
		r.RecordDenial(locks, denied)
	}
	if len(cluster) > 0 {
		r.RecordClusterDenial(cluster, denied)
	}
}
