package webhook

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/navique/lockguard/internal/transport"
)

// Every admission path of lockguard is served here, through
// internal/transport: the same bounds (in flight, bytes, the review's
// timeout), the same answers to what is not a review.

// Path is where lockguard serves the Handler on its webhook server.
const Path = "/validate-delete"

// UpdatePath is where lockguard serves the UpdateHandler (the chart's
// update.lockguard.core.navique.com entry).
const UpdatePath = "/validate-update"

var (
	_ http.Handler      = &Handler{}
	_ http.Handler      = &CreateHandler{}
	_ http.Handler      = &UpdateHandler{}
	_ admission.Handler = &Handler{}
	_ admission.Handler = &CreateHandler{}
	_ admission.Handler = &UpdateHandler{}
)

// ServeHTTP answers an admission.k8s.io/v1 AdmissionReview posted as JSON,
// as controller-runtime's admission.Webhook does, but without copying the
// request's objects: the body is read within the server's shared bounds
// (transport.ServeReview: in-flight, byte budget, the review's timeout as
// the body's deadline) and decoded into a Request, which keeps of
// oldObject (the object being deleted, up to megabytes) only the fields
// the decision reads.
//
// A request that is not such a review gets a plain HTTP error (413, 408,
// 429 or 400, transport.Gate.Serve). The API server, which only sends
// well-formed reviews, treats any of them as a failed call (with
// failurePolicy Fail, the delete is refused).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	transport.ServeReview(h.gate, w, r, func(body []byte) (Request, types.UID, error) {
		req, err := decodeReview(body)
		return req, req.UID, err
	}, h.Decide)
}

// Handle decides a request decoded by controller-runtime: Decide, for
// controller-runtime's admission.Webhook. lockguard serves the Handler
// itself (ServeHTTP), which decodes less.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	r, err := requestOf(req)
	if err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: %w", err))
	}
	return h.Decide(ctx, r)
}

// ServeHTTP answers the AdmissionReview of a Lock create (CreatePath), read
// within the server's shared bounds as the Handler's are, and decoded whole
// (the admission reads the Lock being created).
func (c *CreateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	transport.ServeReview(c.o.Gate, w, r, transport.DecodeReview, c.Handle)
}

// ServeHTTP answers an admission.k8s.io/v1 AdmissionReview of an UPDATE,
// read within the server's shared bounds (transport.ServeReview) and
// decoded whole: the decision compares the object with oldObject.
func (u *UpdateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	transport.ServeReview(u.h.gate, w, r, transport.DecodeReview, u.Handle)
}

// Handle decides one UPDATE: Handler.Decide of its Request.
func (u *UpdateHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	return u.h.Decide(ctx, updateRequestOf(req))
}
