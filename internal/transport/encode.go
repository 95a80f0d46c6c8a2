package transport

import (
	"encoding/json"
	"slices"
	"strconv"
	"sync"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Every review is answered with the same shape: an AdmissionReview whose
// response has a UID, allowed, a status (code, reason, message), audit
// annotations and perhaps warnings. appendReview writes that shape
// without encoding/json's reflection, byte for byte as
// json.NewEncoder(w).Encode(review) writes it (TestAppendReview compares
// the two); a response it does not know the shape of (a patch, status
// details, a typed or listed status) is left to encoding/json.

// reviewHead opens every answer (AdmissionReview's TypeMeta).
var reviewHead = `{"kind":"AdmissionReview","apiVersion":"` + admissionv1.SchemeGroupVersion.String() + `","response":`

// responseBuffers keep the buffers answers are written into; one over
// maxPooledResponse is not kept, so that the pool holds at most that much
// per buffer.
var responseBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledResponse = 16 << 10

// encodeReview returns the JSON of the AdmissionReview answering with
// resp, followed by a newline, as json.Encoder writes it, in a buffer
// from responseBuffers (for putResponseBuffer once written).
func encodeReview(resp *admissionv1.AdmissionResponse) (*[]byte, error) {
	bp := responseBuffers.Get().(*[]byte)
	b, ok := appendReview((*bp)[:0], resp)
	if !ok {
		// A copy: resp itself does not escape, so that the caller's
		// response stays on its stack on the fast path.
		copied := *resp
		out, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
			Response: &copied,
		})
		if err != nil {
			putResponseBuffer(bp)
			return nil, err
		}
		b = append(append((*bp)[:0], out...), '\n')
	}
	*bp = b
	return bp, nil
}

// putResponseBuffer gives bp back to responseBuffers, unless it grew
// over maxPooledResponse.
func putResponseBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledResponse {
		responseBuffers.Put(bp)
	}
}

// appendReview appends the answer of resp to b, and reports false (b
// then holds garbage) when resp is not of the shape it writes.
func appendReview(b []byte, resp *admissionv1.AdmissionResponse) ([]byte, bool) {
	if len(resp.Patch) > 0 || resp.PatchType != nil {
		return b, false
	}
	b = append(b, reviewHead...)
	b = append(b, `{"uid":`...)
	b = appendString(b, string(resp.UID))
	b = append(b, `,"allowed":`...)
	b = strconv.AppendBool(b, resp.Allowed)
	if s := resp.Result; s != nil {
		if s.TypeMeta != (metav1.TypeMeta{}) || s.Details != nil || s.SelfLink != "" || s.ResourceVersion != "" ||
			s.Continue != "" || s.RemainingItemCount != nil || s.ShardInfo != nil {
			return b, false
		}
		// ListMeta is a struct: encoding/json writes it even when empty.
		b = append(b, `,"status":{"metadata":{}`...)
		b = appendMember(b, "status", s.Status)
		b = appendMember(b, "message", s.Message)
		b = appendMember(b, "reason", string(s.Reason))
		if s.Code != 0 {
			b = append(b, `,"code":`...)
			b = strconv.AppendInt(b, int64(s.Code), 10)
		}
		b = append(b, '}')
	}
	if len(resp.AuditAnnotations) > 0 {
		var keys [8]string
		ks := keys[:0]
		for k := range resp.AuditAnnotations {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		b = append(b, `,"auditAnnotations":{`...)
		for i, k := range ks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, resp.AuditAnnotations[k])
		}
		b = append(b, '}')
	}
	if len(resp.Warnings) > 0 {
		b = append(b, `,"warnings":[`...)
		for i, w := range resp.Warnings {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, w)
		}
		b = append(b, ']')
	}
	return append(b, "}}\n"...), true
}

// appendMember appends the member ,"name":value unless value is empty
// (omitempty).
func appendMember(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, value)
}

// appendString appends s as a JSON string, as encoding/json writes it:
// printable ASCII other than the quote, the backslash and the characters
// it escapes for HTML (<, >, &) is copied, anything else is left to
// json.Marshal.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			out, _ := json.Marshal(s) // a string always encodes
			return append(b, out...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
