package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

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
// request's objects: the body is read once into a buffer of its
// Content-Length and decoded into a Request, which keeps of oldObject (the
// object being deleted, up to megabytes) only the fields the decision
// reads.
//
// A request that is not such a review gets a plain HTTP error: 413 for a
// body over MaxReviewSize (refused before reading it when its
// Content-Length says so), 400 otherwise.
// The API server, which only sends well-formed reviews, treats any of them
// as a failed call (with failurePolicy Fail, the delete is refused).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		http.Error(w, "request body is empty", http.StatusBadRequest)
		return
	}
	defer r.Body.Close()
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := readBody(r.Body, r.ContentLength)
	if errors.Is(err, errTooLarge) {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req, err := decodeReview(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp := h.serve(r.Context(), req)
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

// errTooLarge is returned by readBody for a body over MaxReviewSize.
var errTooLarge = fmt.Errorf("request entity is too large; limit is %d bytes", MaxReviewSize)

// readBody reads a request body of contentLength bytes (-1 if unknown)
// into one buffer of that size, and at most MaxReviewSize bytes.
func readBody(r io.Reader, contentLength int64) ([]byte, error) {
	if contentLength > MaxReviewSize {
		return nil, errTooLarge
	}
	if contentLength >= 0 {
		body := make([]byte, contentLength)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		return body, nil
	}
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(r, MaxReviewSize+1))
	if err != nil {
		return nil, fmt.Errorf("reading the request body: %w", err)
	}
	if n > MaxReviewSize {
		return nil, errTooLarge
	}
	return buf.Bytes(), nil
}
