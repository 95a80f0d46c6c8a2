package webhook

import (
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// WithDenialRecorder makes the handler hand every request it refuses
// because of Locks, by any guard, that is not a dry run, to r.
func WithDenialRecorder(r DenialRecorder) Option { return func(h *Handler) { h.denials = r } }

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

// recordRefusal is the one hook every guard's refusal goes through on
// its way to the refusing Locks' status.lastDenied: Decide calls it for
// the delete guards (object, cascade, namespace, CRD), and any other
// guard's decision calls it with the Locks that refused its request. It
// hands the refusal to the DenialRecorder, which only updates memory (the
// write is asynchronous), unless the request is a dry run (the webhook
// declares sideEffects NoneOnDryRun) or no Lock refused it.
func (h *Handler) recordRefusal(locks []lockv1alpha1.Lock, r refusal) {
	if len(locks) == 0 || r.dryRun || h.denials == nil {
		return
	}
	h.denials.RecordDenial(locks, lockv1alpha1.DeniedRequest{
		Time:      metav1.NewTime(time.Now()),
		User:      r.user,
		Operation: string(r.operation),
		Kind:      r.kind,
		Name:      r.name,
	})
}

// refusalOf is the refusal of req, a request the delete guards decided.
func refusalOf(req Request) refusal {
	return refusal{user: req.UserInfo.Username, operation: req.Operation, kind: req.Kind.Kind, name: targetName(req), dryRun: req.DryRun}
}
