package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/navique/lockguard/internal/skim"
)

// decodeReview's skimmer is fuzzed on Request itself in internal/skim
// (FuzzSkim): the decode of what it keeps agrees with the standard decode
// of the whole body, and with the API server's decoder.

// TestDecodeReviewChecks: decodeReview refuses what is not an
// admission.k8s.io/v1 AdmissionReview with a request, and reads the
// Request of one that is.
func TestDecodeReviewChecks(t *testing.T) {
	cases := map[string]struct {
		reason  string
		body    string
		wantErr bool
	}{
		"Review":       {reason: "A v1 review decodes.", body: reviewJSON("admission.k8s.io/v1", "forge", `{"metadata":{"name":"forge"}}`)},
		"OtherVersion": {reason: "A v1beta1 review is refused.", body: reviewJSON("admission.k8s.io/v1beta1", "forge", `{}`), wantErr: true},
		"OtherKind":    {reason: "Another kind is refused.", body: `{"apiVersion":"admission.k8s.io/v1","kind":"Status","request":{}}`, wantErr: true},
		"NoRequest":    {reason: "A review without a request is refused.", body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, wantErr: true},
		"NotJSON":      {reason: "A body that is not JSON is refused.", body: `{"apiVersion":`, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req, err := decodeReview([]byte(tc.body))
			if (err != nil) != tc.wantErr {
				t.Fatalf("%s\ndecodeReview(...): %+v, error %v, want error %v", tc.reason, req, err, tc.wantErr)
			}
			if !tc.wantErr && (req.UID != "u-1" || req.OldObject.Metadata.Name != "forge") {
				t.Errorf("%s\ndecodeReview(...) = %+v, want uid u-1 and oldObject forge", tc.reason, req)
			}
		})
	}
}

// TestReviewFields: the skimmer keeps exactly the members Request reads.
func TestReviewFields(t *testing.T) {
	want := skim.Fields{
		"apiVersion": nil,
		"kind":       nil,
		"request": skim.Fields{
			"uid":       nil,
			"kind":      skim.Fields{"group": nil, "version": nil, "kind": nil},
			"name":      nil,
			"namespace": nil,
			"operation": nil,
			"userInfo":  skim.Fields{"username": nil},
			"dryRun":    nil,
			"options":   skim.Fields{"propagationPolicy": nil, "orphanDependents": nil},
			"oldObject": skim.Fields{
				"metadata": skim.Fields{"name": nil, "uid": nil, "deletionTimestamp": nil, "labels": nil, "finalizers": nil},
				"spec":     skim.Fields{"group": nil, "names": skim.Fields{"kind": nil}},
				"status":   skim.Fields{"phase": nil},
			},
		},
	}
	if diff := cmp.Diff(want, reviewFields); diff != "" {
		t.Errorf("reviewFields: -want, +got:\n%s", diff)
	}
}
