package webhook

import (
	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// DenialRecorder records the requests Locks refuse, for their
// status.lastDenied (in lockguard, internal/denials). RecordDenial must
// not block: it is called on the admission path.
type DenialRecorder interface {
	// RecordDenial records that locks refused the request denied (its
	// Count is ignored).
	RecordDenial(locks []lockv1alpha1.Lock, denied lockv1alpha1.DeniedRequest)
}
