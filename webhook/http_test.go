package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/navique/lockguard/internal/transport"
)

// reviewJSON is an AdmissionReview of a DELETE of Stack forge/<name>.
func reviewJSON(apiVersion, name, oldObject string) string {
	return `{"apiVersion":"` + apiVersion + `","kind":"AdmissionReview","request":{"uid":"u-1",` +
		`"kind":{"group":"core.navique.com","version":"v1alpha1","kind":"Stack"},` +
		`"resource":{"group":"core.navique.com","version":"v1alpha1","resource":"stacks"},` +
		`"name":"` + name + `","namespace":"forge","operation":"DELETE","userInfo":{"username":"alice"},` +
		`"object":null,"oldObject":` + oldObject + `,"dryRun":false,"options":{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1"}}}`
}

func TestServeHTTP(t *testing.T) {
	const denied = "resource is protected by Lock(s) [l]; delete the Lock(s) before deleting this resource"
	oldForge := `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"name":"forge","namespace":"forge","uid":"s-1"},"spec":{"payload":"` + strings.Repeat("x", 64<<10) + `"}}`

	cases := map[string]struct {
		reason      string
		contentType string
		body        string
		wantHTTP    int
		want        result // for HTTP 200
	}{
		"Denied": {
			reason:   "A DELETE of a locked object is denied in a v1 AdmissionReview with the request's UID.",
			body:     reviewJSON("admission.k8s.io/v1", "forge", oldForge),
			wantHTTP: http.StatusOK,
			want:     result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: denied},
		},
		"DeleteCollection": {
			reason:   "Without a name, the name is read from oldObject, whose other members (64 KiB here) are skipped.",
			body:     reviewJSON("admission.k8s.io/v1", "", oldForge),
			wantHTTP: http.StatusOK,
			want:     result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: denied},
		},
		"NullOldObject": {
			reason:   "A deletecollection whose oldObject is null names no object: fail closed.",
			body:     reviewJSON("admission.k8s.io/v1", "", "null"),
			wantHTTP: http.StatusOK,
			want:     result{Code: 400, Reason: metav1.StatusReasonBadRequest, Message: "lockguard could not verify Locks: the DELETE of a Stack.core.navique.com names no object"},
		},
		"CharsetUTF8": {
			reason:   "application/json with charset utf-8 is JSON.",
			body:     reviewJSON("admission.k8s.io/v1", "forge", "{}"),
			wantHTTP: http.StatusOK, contentType: "application/json; charset=utf-8",
			want: result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: denied},
		},
		"V1beta1": {
			reason:   "The webhook configuration asks for v1 reviews only.",
			body:     reviewJSON("admission.k8s.io/v1beta1", "forge", "{}"),
			wantHTTP: http.StatusBadRequest,
		},
		"TextPlain": {
			reason:   "Another content type is refused.",
			body:     reviewJSON("admission.k8s.io/v1", "forge", "{}"),
			wantHTTP: http.StatusBadRequest, contentType: "text/plain",
		},
		"NoRequest": {
			reason:   "A review without a request cannot be answered.",
			body:     `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`,
			wantHTTP: http.StatusBadRequest,
		},
		"Truncated": {
			reason:   "Malformed JSON is refused.",
			body:     reviewJSON("admission.k8s.io/v1", "forge", "{}")[:100],
			wantHTTP: http.StatusBadRequest,
		},
		"TooLarge": {
			reason:   "A body over transport.MaxReviewSize is refused.",
			body:     reviewJSON("admission.k8s.io/v1", "forge", `"`+strings.Repeat("x", transport.MaxReviewSize)+`"`),
			wantHTTP: http.StatusRequestEntityTooLarge,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := NewHandler(Config{Locks: indexOf(t, forgeStack, lock("l", ""))})
			req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader(tc.body))
			ct := tc.contentType
			if ct == "" {
				ct = "application/json"
			}
			req.Header.Set("Content-Type", ct)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantHTTP {
				t.Fatalf("%s\nServeHTTP(...): HTTP %d %q, want %d", tc.reason, rec.Code, rec.Body.String(), tc.wantHTTP)
			}
			if tc.wantHTTP != http.StatusOK {
				return
			}
			var out admissionv1.AdmissionReview
			dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&out); err != nil || out.Response == nil {
				t.Fatalf("%s\nServeHTTP(...): answer %q is not an AdmissionReview: %v", tc.reason, rec.Body.String(), err)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response.UID != "u-1" {
				t.Errorf("%s\nServeHTTP(...): answer %s %s UID %q, want admission.k8s.io/v1 AdmissionReview UID u-1", tc.reason, out.APIVersion, out.Kind, out.Response.UID)
			}
			got := result{Allowed: out.Response.Allowed}
			if r := out.Response.Result; r != nil {
				got.Code, got.Reason, got.Message = r.Code, r.Reason, r.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nServeHTTP(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
