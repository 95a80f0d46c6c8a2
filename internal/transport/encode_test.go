package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestAppendReview checks that encodeReview writes every answer byte for
// byte as json.NewEncoder(w).Encode of the AdmissionReview does, on the
// shapes lockguard answers with and on those it leaves to encoding/json.
func TestAppendReview(t *testing.T) {
	jsonPatch := admissionv1.PatchTypeJSONPatch
	n := int64(3)
	denied := admission.Denied("stacks.core.navique.com \"a\" is protected by Lock <ns>/keep & \"more\"\n\tline é \u2028 \x01")
	denied.AuditAnnotations = map[string]string{"guard": "object", "decision": "denied", "locks": "keep,other"}
	withStatus := admission.Allowed("")
	withStatus.Result.Status = metav1.StatusFailure
	cases := map[string]admission.Response{
		"allowed":      admission.Allowed(""),
		"allowed msg":  admission.Allowed("not guarded"),
		"denied":       denied,
		"errored":      admission.Errored(http.StatusServiceUnavailable, errors.New("lockguard could not verify Locks: <timeout>")),
		"warnings":     admission.Allowed("").WithWarnings("lockguard: would deny: x", "second \"quoted\""),
		"no result":    {AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true}},
		"code zero":    {AdmissionResponse: admissionv1.AdmissionResponse{Result: &metav1.Status{Message: "m"}}},
		"status field": withStatus,
		"empty maps":   {AdmissionResponse: admissionv1.AdmissionResponse{AuditAnnotations: map[string]string{}, Warnings: []string{}}},
		"many annotations": {AdmissionResponse: admissionv1.AdmissionResponse{AuditAnnotations: map[string]string{
			"a": "1", "j": "2", "c": "3", "d": "4", "e": "5", "f": "6", "g": "7", "h": "8", "i": "9", "b": "10"}}},
		// Left to encoding/json.
		"patch":   {AdmissionResponse: admissionv1.AdmissionResponse{Allowed: true, Patch: []byte(`[]`), PatchType: &jsonPatch}},
		"details": {AdmissionResponse: admissionv1.AdmissionResponse{Result: &metav1.Status{Details: &metav1.StatusDetails{Name: "x"}}}},
		"typed":   {AdmissionResponse: admissionv1.AdmissionResponse{Result: &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status"}}}},
		"listed":  {AdmissionResponse: admissionv1.AdmissionResponse{Result: &metav1.Status{ListMeta: metav1.ListMeta{RemainingItemCount: &n}}}},
	}
	for name, resp := range cases {
		t.Run(name, func(t *testing.T) {
			resp.UID = "705ab4f5-6393-11e8-b7cc-42010a800002"
			if name == "no result" {
				resp.UID = "uid <&> \"x\""
			}
			var want bytes.Buffer
			err := json.NewEncoder(&want).Encode(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
				Response: &resp.AdmissionResponse,
			})
			if err != nil {
				t.Fatal(err)
			}
			got, err := encodeReview(&resp.AdmissionResponse)
			if err != nil {
				t.Fatal(err)
			}
			if string(*got) != want.String() {
				t.Errorf("encodeReview:\n got %s\nwant %s", *got, want.String())
			}
			putResponseBuffer(got)
		})
	}
}

// TestResponseBufferBounded checks that a buffer grown over
// maxPooledResponse is not kept.
func TestResponseBufferBounded(t *testing.T) {
	resp := admission.Denied(strings.Repeat("x", 2*maxPooledResponse))
	out, err := encodeReview(&resp.AdmissionResponse)
	if err != nil {
		t.Fatal(err)
	}
	big := cap(*out)
	putResponseBuffer(out)
	for range 100 {
		bp := responseBuffers.Get().(*[]byte)
		if cap(*bp) == big {
			t.Fatalf("a buffer of %d bytes was kept, over maxPooledResponse (%d)", big, maxPooledResponse)
		}
	}
}

// BenchmarkEncodeReview compares encodeReview with encoding/json on a
// denial.
func BenchmarkEncodeReview(b *testing.B) {
	resp := admission.Denied("stacks.core.navique.com \"a\" is protected by Lock keep")
	resp.UID = "705ab4f5-6393-11e8-b7cc-42010a800002"
	resp.AuditAnnotations = map[string]string{"guard": "object", "decision": "denied", "locks": "keep"}
	b.Run("appendReview", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out, _ := encodeReview(&resp.AdmissionResponse)
			putResponseBuffer(out)
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = json.NewEncoder(&bytes.Buffer{}).Encode(admissionv1.AdmissionReview{
				TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
				Response: &resp.AdmissionResponse,
			})
		}
	})
}
