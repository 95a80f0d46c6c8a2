package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// UnlockPath is where lockguard refuses lifting a Lock without the unlock
// verb (the chart's unlock.lockguard.core.navique.com entry, rendered for
// API servers without admissionregistration.k8s.io/v1 policies, before
// 1.30; from 1.30 the chart's policy does it in the API server).
const UnlockPath = "/validate-unlock"

// UnlockHandler is the handler of UnlockPath (docs/contract.md rule 18),
// for Locks and ClusterLocks alike (rule 22).
// The API server calls it only for the DELETEs and UPDATEs of Locks by
// principals without lockv1alpha1.UnlockVerb on the Lock: the entry's
// matchConditions make that check (an authorizer check, as the policy's)
// with the request's whole identity, and skip the exempt principals. So
// it refuses every DELETE, and every UPDATE that lowers what the Lock
// protects (lockv1alpha1.Lowers); it allows every other update. It reads
// and writes nothing but the review.
//
// The entry fails open (failurePolicy Ignore, a short timeout): deleting
// a Lock must never hang nor be refused because lockguard cannot answer
// (docs/contract.md rule 8), so while lockguard is down, RBAC's delete or
// update alone decides (docs/limits.md).
type UnlockHandler struct {
	gate *transport.Gate
}

// NewUnlockHandler returns the handler of UnlockPath, whose bodies are
// read within gate, the webhook server's.
func NewUnlockHandler(gate *transport.Gate) *UnlockHandler {
	if gate == nil {
		gate = transport.NewGate(transport.Limits{}, nil)
	}
	return &UnlockHandler{gate: gate}
}

// ServeHTTP answers an AdmissionReview posted as JSON within the Gate
// (transport.ServeReview), decoded whole (a Lock is small).
func (u *UnlockHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	transport.ServeReview(u.gate, w, r, transport.DecodeReview, u.Handle)
}

// Handle decides a review of the Lock entry: the request's principal
// lacks the unlock verb on the Lock. The Lock's name is its old object's:
// a deletecollection's request names no object. A Lock it cannot decode
// is refused (fail closed: the review came from the API server, which
// sends valid Locks).
func (u *UnlockHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != lockv1alpha1.Group || req.SubResource != "" ||
		(req.Operation != admissionv1.Delete && req.Operation != admissionv1.Update) {
		return admission.Allowed("")
	}
	switch req.Kind.Kind {
	case "Lock":
	case "ClusterLock":
		return u.handleClusterLock(req)
	default:
		return admission.Allowed("")
	}
	var old lockv1alpha1.Lock
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not decode the Lock being changed in %s: %w", req.Namespace, err))
	}
	if req.Operation == admissionv1.Delete {
		return admission.Denied(lockv1alpha1.UnlockDeleteMessage(req.Namespace, old.Name))
	}
	var next lockv1alpha1.Lock
	if err := json.Unmarshal(req.Object.Raw, &next); err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not decode the updated Lock %s/%s: %w", req.Namespace, old.Name, err))
	}
	if what, lowers := lockv1alpha1.Lowers(&old.Spec, &next.Spec); lowers {
		return admission.Denied(lockv1alpha1.UnlockLowerMessage(what, req.Namespace, old.Name))
	}
	return admission.Allowed("")
}

// handleClusterLock decides a review of the ClusterLock entry, as Handle
// does a Lock's: the principal lacks the unlock verb on the ClusterLock,
// so its DELETE is refused, and an UPDATE that lowers what it protects
// (Lowers, of the ClusterLock's level, expiry and enforcement).
func (u *UnlockHandler) handleClusterLock(req admission.Request) admission.Response {
	var old lockv1alpha1.ClusterLock
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not decode the ClusterLock being changed: %w", err))
	}
	if req.Operation == admissionv1.Delete {
		return admission.Denied(lockv1alpha1.ClusterUnlockMessage("deleting", old.Name))
	}
	var next lockv1alpha1.ClusterLock
	if err := json.Unmarshal(req.Object.Raw, &next); err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not decode the updated ClusterLock %s: %w", old.Name, err))
	}
	if what, lowers := lockv1alpha1.Lowers(&old.AsLock().Spec, &next.AsLock().Spec); lowers {
		return admission.Denied(lockv1alpha1.ClusterUnlockMessage("lowering the "+string(what)+" of", old.Name))
	}
	return admission.Allowed("")
}
