package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	k8sjson "sigs.k8s.io/json"

	"github.com/navique/lockguard/internal/skim"
	"github.com/navique/lockguard/internal/transport"
)

// LeaseGuardPath is the path of the webhook entry that keeps the identity
// Leases lockguard's own (the chart's peer-leases.lockguard.core.navique.com,
// on API servers without admissionregistration.k8s.io/v1 policies).
const LeaseGuardPath = "/validate-peer-lease"

// LeaseWriteVerb is the RBAC verb on leases that lets a principal create,
// update or delete the identity Leases (those labelled LeaseGroupLabel)
// in lockguard's namespace: the chart grants it to lockguard's
// ServiceAccount only; a cluster admin holding every verb has it too.
// The built-in edit and admin roles, and other controllers' Roles, list
// their verbs and do not.
const LeaseWriteVerb = "lockguard-peer"

// LeaseGuardMessage is the refusal of a write of an identity Lease in
// namespace by a principal without LeaseWriteVerb.
func LeaseGuardMessage(namespace string) string {
	return fmt.Sprintf("only lockguard writes the identity Leases of its replicas (label %s): "+
		"the view of the replicas in the peer protocol assumes it; this needs the verb %s on leases in %s",
		LeaseGroupLabel, LeaseWriteVerb, namespace)
}

// LeaseGuard is the handler of LeaseGuardPath. The API server calls it
// only for writes of the identity Leases by principals without
// LeaseWriteVerb (the entry's objectSelector and matchConditions, which
// exempt lockguard's own writes, so that they never wait for it): it
// refuses every request. It reads nothing and writes nothing.
//
// The view of the replicas (Leases) assumes that only the replicas write
// their Leases: a Lease deleted by someone else drops its replica from
// the others' views while it still counts itself as one, and the others
// admit Lock creates without telling it (docs/contract.md rule 17).
type LeaseGuard struct {
	gate *transport.Gate
}

// NewLeaseGuard returns the handler of LeaseGuardPath, whose bodies are
// read within gate, the webhook server's: anyone who reaches the port can
// post to the path, and no path is read outside the server's one bound
// (docs/contract.md rule 17).
func NewLeaseGuard(gate *transport.Gate) *LeaseGuard {
	return &LeaseGuard{gate: gate}
}

// ServeHTTP answers an AdmissionReview posted as JSON within the Gate
// (transport.ServeReview), keeping of it only what the answer needs: the
// request's UID and namespace.
func (g *LeaseGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	transport.ServeReview(g.gate, w, r, decodeLeaseReview, func(_ context.Context, req leaseRequest) admission.Response {
		return admission.Denied(LeaseGuardMessage(req.Namespace))
	})
}

// leaseRequest is what LeaseGuard reads of a review's request.
type leaseRequest struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
}

// leaseReview is an admission.k8s.io/v1 AdmissionReview as LeaseGuard
// reads it.
type leaseReview struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Request    *leaseRequest `json:"request"`
}

// leaseReviewFields are the members decodeLeaseReview keeps.
var leaseReviewFields = skim.FieldsOf(reflect.TypeFor[leaseReview]())

// leaseReviewTable is leaseReviewFields compiled once.
var leaseReviewTable = skim.Compile(leaseReviewFields)

// decodeLeaseReview decodes body, an AdmissionReview in JSON, keeping
// only leaseRequest's fields (the Leases' objects are skipped, validated,
// by skim).
func decodeLeaseReview(body []byte) (leaseRequest, types.UID, error) {
	kept, err := leaseReviewTable.Append(make([]byte, 0, 512), body)
	if err != nil {
		return leaseRequest{}, "", fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	var r leaseReview
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(kept, &r); err != nil {
		return leaseRequest{}, "", fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if v := admissionv1.SchemeGroupVersion.String(); r.APIVersion != v || r.Kind != "AdmissionReview" {
		return leaseRequest{}, "", fmt.Errorf("the body is a %q %q, not an %s AdmissionReview", r.APIVersion, r.Kind, v)
	}
	if r.Request == nil {
		return leaseRequest{}, "", errors.New("the AdmissionReview has no request")
	}
	return *r.Request, r.Request.UID, nil
}
