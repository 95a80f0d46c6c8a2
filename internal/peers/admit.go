package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// AdmitPath is where lockguard admits Lock CREATEs.
const AdmitPath = "/validate-lock-create"

// AdmissionHandler admits Lock CREATEs once every replica has been told
// (Announce). It allows every other request, and dry runs (which write
// nothing) without telling anyone.
func (p *Peers) AdmissionHandler() admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		if req.Operation != admissionv1.Create || req.Kind.Kind != "Lock" || (req.DryRun != nil && *req.DryRun) {
			return admission.Allowed("")
		}
		var l lockv1alpha1.Lock
		if err := json.Unmarshal(req.Object.Raw, &l); err != nil {
			return refuse(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Errorf("lockguard could not decode the Lock: %w", err))
		}
		if l.Namespace != req.Namespace {
			// The API server sets the object's namespace to the
			// request's: a review where they differ is not its.
			return refuse(http.StatusBadRequest, metav1.StatusReasonBadRequest,
				fmt.Errorf("lockguard got a Lock create in namespace %q for a Lock of namespace %q", req.Namespace, l.Namespace))
		}
		a, ok := AnnouncementOf(&l)
		if !ok {
			// It protects nothing: no delete can depend on it.
			return admission.Allowed("")
		}
		if a.UID == "" || a.Name == "" {
			return refuse(http.StatusBadRequest, metav1.StatusReasonBadRequest, fmt.Errorf("lockguard got a Lock create without a name or UID"))
		}
		if err := p.Announce(ctx, a); err != nil {
			return refuse(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
				fmt.Errorf("%s: %w", lockv1alpha1.CreateRefusedRetry, err))
		}
		// After Announce: the leader's reconciler keeps the label while
		// the create is pending, so it does not take it off again before
		// the Lock reaches its cache.
		if p.o.LabelNamespace != nil {
			if err := p.o.LabelNamespace(ctx, a.Namespace); err != nil {
				// The marker stays until the sweep (Announce says why).
				return refuse(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable,
					fmt.Errorf("%s: %w", lockv1alpha1.CreateRefusedRetry, err))
			}
		}
		return admission.Allowed("")
	})
}

// ServeAdmission serves AdmitPath: the admission reviews of Lock creates,
// read within the webhook server's bounds (Config.Gate).
func (p *Peers) ServeAdmission(w http.ResponseWriter, r *http.Request) {
	transport.ServeReview(p.o.Gate, w, r, transport.DecodeReview, p.AdmissionHandler().Handle)
}

// refuse answers an error with its code and reason.
func refuse(code int32, reason metav1.StatusReason, err error) admission.Response {
	resp := admission.Errored(code, err)
	resp.Result.Reason = reason
	return resp
}
