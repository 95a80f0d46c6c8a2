package transport

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
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	admissionmetrics "sigs.k8s.io/controller-runtime/pkg/webhook/admission/metrics"
)

// Serve reads r's JSON body of at most limit bytes within the Gate's
// bounds and calls fn with it, and with a context that ends
// DecisionMargin before the request's deadline (ReviewTimeout: the body's
// read deadline). fn may Release the body early; it is released when fn
// returns either way. Serve answers itself what does not reach fn: 429
// over the Limits, 413 for a body over limit (before reading it when its
// Content-Length says so), 408 for a body not received in time, 400
// otherwise. The write deadline replaces that of an earlier request on
// the same connection.
func (g *Gate) Serve(w http.ResponseWriter, r *http.Request, limit int64, fn func(ctx context.Context, body *Body)) {
	timeout := ReviewTimeout(r)
	deadline := time.Now().Add(timeout)
	rc := http.NewResponseController(w)
	// The server sets no deadline on bodies: without one, a stalled body
	// is held forever. A writer that cannot take deadlines (a test's
	// recorder) needs none.
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline.Add(time.Second))
	t, reason := g.share.enter(requestSource(r), deadline, w)
	if t == nil {
		g.refuse(reason)
		http.Error(w, refusals[reason], http.StatusTooManyRequests)
		return
	}
	defer t.leave()
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	if r.Body == nil || r.Body == http.NoBody {
		http.Error(w, "request body is empty", http.StatusBadRequest)
		return
	}
	defer r.Body.Close()
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	body, err := readBody(r.Body, r.ContentLength, limit, g.budget, t)
	t.doneReading()
	switch {
	case err != nil && t.wasCut():
		g.refuse(RefusedCutOff)
		http.Error(w, refusals[RefusedCutOff], http.StatusTooManyRequests)
		return
	case errors.Is(err, ErrTooLarge):
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	case errors.Is(err, ErrBudget):
		g.refuseBytes(w)
		return
	case errors.Is(err, os.ErrDeadlineExceeded):
		g.refuse(RefusedReadTimeout)
		http.Error(w, "the request body did not arrive in time", http.StatusRequestTimeout)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	defer body.Release()
	ctx, cancel := withLazyDeadline(r.Context(), deadline.Add(-DecisionMargin(timeout)))
	defer cancel()
	fn(ctx, body)
}

// refusals are the answers of the Gate's refusals (429) by reason.
var refusals = map[string]string{
	RefusedInFlight:          "too many requests in flight; retry later",
	RefusedInFlightPerSource: "too many requests in flight from this address; retry later",
	RefusedCutOff:            "the request body was cut off for clients holding less of the server; retry later",
	RefusedMemory:            "too many review bytes in flight for the memory lockguard's caches leave; retry later",
}

// checkContentType accepts application/json, optionally with charset utf-8.
func checkContentType(ct string) error {
	if ct == "application/json" {
		return nil // what the API server sends, without parsing it
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; len(params) == 0 || len(params) == 1 && ok && strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	return fmt.Errorf("content type %q is not application/json", ct)
}

// ServeReview answers an admission.k8s.io/v1 AdmissionReview posted as
// JSON, as controller-runtime's admission.Webhook does, within g's bounds
// (Serve, at most MaxReviewSize bytes): decode turns the body into a
// request R (copying what it keeps: the buffer goes back before decide
// runs, and the copy, taken to be at most the body's length, is charged
// to the byte budget until the answer is written: 429 if it does not fit)
// and its UID, decide answers it. A body that does not decode is
// answered 400; a panic in decide is answered as an error and counted in
// controller-runtime's webhook panic metric.
func ServeReview[R any](g *Gate, w http.ResponseWriter, r *http.Request,
	decode func([]byte) (R, types.UID, error), decide func(context.Context, R) admission.Response) {
	g.Serve(w, r, MaxReviewSize, func(ctx context.Context, body *Body) {
		// What decoding copies out of the body (an update's two objects)
		// is at most the body's length, counted until the answer is
		// written; the buffer is given up before decide runs.
		if !body.charge(int64(len(body.Bytes()))) {
			g.refuseBytes(w)
			return
		}
		req, uid, err := decode(body.Bytes())
		body.dropBuffer()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp := complete(ctx, uid, decide, req)
		out, err := encodeReview(&resp.AdmissionResponse)
		if err == nil {
			w.Header()["Content-Type"] = jsonContentType
			_, err = w.Write(*out)
			putResponseBuffer(out)
		}
		if err != nil {
			logf.FromContext(r.Context()).WithName("admission").Error(err, "Cannot write an admission response", "requestID", uid)
		}
	})
}

// jsonContentType is the Content-Type header of every answer, shared
// (read-only; Header.Set would make a slice per answer).
var jsonContentType = []string{"application/json"}

// complete runs decide on req with controller-runtime's completion of the
// response (UID, status code) and its recovery from panics. (req is passed
// as it is, not in a closure: a closure would take it to the heap.)
func complete[R any](ctx context.Context, uid types.UID, decide func(context.Context, R) admission.Response, req R) (resp admission.Response) {
	defer func() {
		if r := recover(); r != nil {
			admissionmetrics.WebhookPanics.WithLabelValues().Inc()
			logf.FromContext(ctx).WithName("admission").Error(fmt.Errorf("panic: %v", r), "Recovered from a panic in the admission handler", "requestID", uid)
			resp = admission.Errored(http.StatusInternalServerError, fmt.Errorf("panic: %v [recovered]", r))
			resp.UID = uid
		}
	}()
	resp = decide(ctx, req)
	// Complete fails only on JSON patches, which a validating handler has none of.
	_ = resp.Complete(admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: uid}})
	return resp
}

// DecodeReview decodes an AdmissionReview (admission.k8s.io/v1) whole,
// for a path whose decision needs the request's objects (controller-
// runtime's admission.Request); for ServeReview.
func DecodeReview(body []byte) (admission.Request, types.UID, error) {
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return admission.Request{}, "", fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if review.APIVersion != admissionv1.SchemeGroupVersion.String() || review.Kind != "AdmissionReview" {
		return admission.Request{}, "", fmt.Errorf("want an %s AdmissionReview, got %s %s", admissionv1.SchemeGroupVersion, review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return admission.Request{}, "", errors.New("the AdmissionReview has no request")
	}
	return admission.Request{AdmissionRequest: *review.Request}, review.Request.UID, nil
}
