package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/navique/lockguard/internal/transport"
)

// leaseReviewBody is the JSON of an AdmissionReview of a write of an
// identity Lease in namespace lockguard-system, whose Lease carries pad
// bytes of annotation (a forged body can be as large as the port takes).
func leaseReviewBody(t *testing.T, op admissionv1.Operation, pad int) []byte {
	t.Helper()
	lease := `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"r","namespace":"lockguard-system",` +
		`"annotations":{"pad":"` + strings.Repeat("x", pad) + `"}}}`
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"0d6c3b4e-2f6a-4c1e-9c39-6f0e6f0b7a11",` +
		`"kind":{"group":"coordination.k8s.io","version":"v1","kind":"Lease"},"resource":{"group":"coordination.k8s.io","version":"v1","resource":"leases"},` +
		`"namespace":"lockguard-system","name":"r","operation":"` + string(op) + `","userInfo":{"username":"mallory"},` +
		`"object":` + lease + `,"oldObject":` + lease + `}}`
	return []byte(review)
}

// post sends body to h as the API server does and returns the answer.
func post(h http.Handler, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, LeaseGuardPath+"?timeout=10s", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestLeaseGuardRefuses: whatever reaches the identity Leases' entry (only
// writes by principals without LeaseWriteVerb do) is refused, with the
// message that names the verb, answering the review's UID.
func TestLeaseGuardRefuses(t *testing.T) {
	guard := NewLeaseGuard(transport.NewGate(transport.Limits{}, nil))
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
		w := post(guard, leaseReviewBody(t, op, 10))
		if w.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", op, w.Code, w.Body)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(w.Body.Bytes(), &review); err != nil || review.Response == nil {
			t.Fatalf("%s: answer %s: %v", op, w.Body, err)
		}
		want := &admissionv1.AdmissionResponse{
			UID: "0d6c3b4e-2f6a-4c1e-9c39-6f0e6f0b7a11",
			Result: &metav1.Status{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: "only lockguard writes the identity Leases of its replicas (label lockguard.navique.com/peers): " +
					"the view of the replicas in the peer protocol assumes it; this needs the verb lockguard-peer on leases in lockguard-system"},
		}
		if diff := cmp.Diff(want, review.Response); diff != "" {
			t.Errorf("%s: response: -want, +got:\n%s", op, diff)
		}
	}
}

// TestLeaseGuardWithinGate is issue 36's attack on the identity Leases'
// path: anyone who reaches the port can post to it (the API server
// presents no client certificate unless given one), so its bodies are
// read within the webhook server's one Gate, as every other path's
// (docs/contract.md rule 17): a body is not read while the Gate's
// in-flight limit is reached by the other paths, nor beyond the bytes
// the Gate has left.
func TestLeaseGuardWithinGate(t *testing.T) {
	t.Run("InFlight", func(t *testing.T) {
		var refused []string
		gate := transport.NewGate(transport.Limits{MaxInFlight: 1}, func(reason string) { refused = append(refused, reason) })
		// Another path's review holds the one slot until the end.
		entered, done := make(chan struct{}), make(chan struct{})
		other := httptest.NewRequest(http.MethodPost, "/validate-delete", strings.NewReader(`{}`))
		other.Header.Set("Content-Type", "application/json")
		go gate.Serve(httptest.NewRecorder(), other, transport.MaxReviewSize, func(context.Context, *transport.Body) {
			close(entered)
			<-done
		})
		<-entered
		w := post(NewLeaseGuard(gate), leaseReviewBody(t, admissionv1.Delete, 10))
		close(done)
		if diff := cmp.Diff("429 too many requests in flight from this address; retry later\n [in_flight_per_source]", answer(w, refused)); diff != "" {
			t.Errorf("a lease review while the Gate is full: -want, +got:\n%s", diff)
		}
	})
	t.Run("Bytes", func(t *testing.T) {
		var refused []string
		gate := transport.NewGate(transport.Limits{MaxBufferedBytes: 1 << 20}, func(reason string) { refused = append(refused, reason) })
		// 3 MiB, under transport.MaxReviewSize: the Gate's budget alone
		// refuses it.
		w := post(NewLeaseGuard(gate), leaseReviewBody(t, admissionv1.Update, 3<<20))
		if diff := cmp.Diff("429 too many review bytes in flight; retry later\n [buffered_bytes]", answer(w, refused)); diff != "" {
			t.Errorf("a 3 MiB lease review through a Gate of 1 MiB: -want, +got:\n%s", diff)
		}
	})
}

// answer is w's status code and body, and the Gate's refusals.
func answer(w *httptest.ResponseRecorder, refused []string) string {
	return fmt.Sprintf("%d %s [%s]", w.Code, w.Body, strings.Join(refused, ","))
}
