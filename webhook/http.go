package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	admissionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/admission/metrics"
)

// MaxReviewSize bounds the body of an AdmissionReview, as in
// controller-runtime: two objects of at most 3 MiB each, plus 1 MiB.
const MaxReviewSize = 7 << 20

var _ http.Handler = &Handler{}

// ServeHTTP answers an admission.k8s.io/v1 AdmissionReview posted as JSON,
// as controller-runtime's admission.Webhook does, but without copying the
// request's objects: the body is read once into a pooled buffer that grows
// only as bytes arrive (readBody) and decoded into a Request, which keeps of
// oldObject (the object being deleted, up to megabytes) only the fields the
// decision reads.
//
// The review must arrive before the API server stops waiting for the answer
// (reviewTimeout, from the URL's ?timeout=, at most 30 s): that is the
// body's read deadline, and the decision ends decisionMargin before it.
// Beyond Limits, a review is answered 429 at once.
//
// A request that is not such a review gets a plain HTTP error: 413 for a
// body over MaxReviewSize (refused before reading it when its
// Content-Length says so), 408 for a body not received in time, 429 over
// the Limits, 400 otherwise.
// The API server, which only sends well-formed reviews, treats any of them
// as a failed call (with failurePolicy Fail, the delete is refused).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	timeout := reviewTimeout(r)
	deadline := time.Now().Add(timeout)
	rc := http.NewResponseController(w)
	// The server sets no deadline on bodies (controller-runtime's sets one
	// on headers only): without one, a stalled body is held forever. The
	// write deadline also replaces that of an earlier review on the same
	// connection. A writer that cannot take deadlines (a test's recorder)
	// needs none.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(time.Second))
	if !h.gate.enter() {
		h.metrics.refuse(RefusedInFlight)
		http.Error(w, "too many admission reviews in flight; retry later", http.StatusTooManyRequests)
		return
	}
	defer h.gate.leave()

	if r.Body == nil || r.Body == http.NoBody {
		http.Error(w, "request body is empty", http.StatusBadRequest)
		return
	}
	defer r.Body.Close()
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := readBody(r.Body, r.ContentLength, h.gate.budget)
	switch {
	case errors.Is(err, errTooLarge):
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	case errors.Is(err, errBudget):
		h.metrics.refuse(RefusedBufferedBytes)
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		h.metrics.refuse(RefusedReadTimeout)
		http.Error(w, "the request body did not arrive in time", http.StatusRequestTimeout)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	// decodeReview copies what it keeps: the buffer goes back at once.
	req, err := decodeReview(body.Bytes())
	body.Release()
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline.Add(-decisionMargin(timeout)))
	defer cancel()
	resp := h.serve(ctx, req)
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Response: &resp.AdmissionResponse,
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		logf.FromContext(r.Context()).WithName("admission").Error(err, "Cannot write an admission response", "requestID", req.UID)
	}
}

// checkContentType accepts application/json, optionally with charset utf-8.
func checkContentType(ct string) error {
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; len(params) == 0 || len(params) == 1 && ok && strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	return fmt.Errorf("content type %q is not application/json", ct)
}

// serve is Decide with controller-runtime's completion of the response
// (UID, status code) and its recovery from panics.
func (h *Handler) serve(ctx context.Context, req Request) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			admissionmetrics.WebhookPanics.WithLabelValues().Inc()
			logf.FromContext(ctx).WithName("admission").Error(fmt.Errorf("panic: %v", r), "Recovered from a panic in the admission handler", "requestID", req.UID)
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", r))
			resp.UID = req.UID
		}
	}()
	resp = h.Decide(ctx, req)
	// Complete fails only on JSON patches, which a validating handler has none of.
	_ = resp.Complete(admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: req.UID}})
	return resp
}
