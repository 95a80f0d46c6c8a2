package webhook

import (
	"net/http"

	"k8s.io/apimachinery/pkg/types"

	"github.com/navique/lockguard/internal/transport"
)

var _ http.Handler = &Handler{}

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
