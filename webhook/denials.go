package webhook

import (
	admissionv1 "k8s.io/api/admission/v1"

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

// refusal is a request that Locks refused, as recordRefusal records it.
type refusal struct {
	// user sent the request, as the API server authenticated them.
	user string
	// operation is the request's: DELETE, or UPDATE for the update guard.
	operation admissionv1.Operation
	// kind and name are those of the object the request was for.
	kind, name string
	// dryRun: the request changes nothing, and nothing is recorded.
	dryRun bool
}

// refusalOf is the refusal of req, a request the delete guards decided.
func refusalOf(req Request) refusal {
	return refusal{user: req.UserInfo.Username, operation: req.Operation, kind: req.Kind.Kind, name: targetName(req), dryRun: req.DryRun}
}
