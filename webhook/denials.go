package webhook

import (
	"time"

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

// recordRefusal is where every guard's decision goes once made: when d
// refuses req because of Locks (d.locks), it records the refusal, on the
// Locks' status (DenialRecorder) and as Events, both asynchronously,
// unless req is a dry run (the webhook declares sideEffects
// NoneOnDryRun). A guard added later records its refusals by returning
// them as a decision with its Locks.
func (h *Handler) recordRefusal(req Request, d decision) {
	if len(d.locks) == 0 || d.resp.Allowed || req.DryRun {
		return
	}
	if h.denials != nil {
		h.denials.RecordDenial(d.locks, lockv1alpha1.DeniedRequest{
			Time:      metav1.NewTime(time.Now()),
			User:      req.UserInfo.Username,
			Operation: string(req.Operation),
			Kind:      req.Kind.Kind,
			Name:      targetName(req),
		})
	}
	if h.events != nil {
		recordDenial(h.events, req, d)
	}
}
