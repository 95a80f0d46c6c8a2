package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/navique/lockguard/certs"
)

// TestCheckWebhookClientCertRequired runs check-webhook, what the chart's
// helm test Pod runs, against a TLS server that allows every review, with
// and without certs.ReviewCallers in front (--review-client-ca): with
// --want-client-cert-required it succeeds only on lockguard's refusal of
// its review, which carries no client certificate; without the flag that
// refusal is a failure.
func TestCheckWebhookClientCertRequired(t *testing.T) {
	allow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	})
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	start := func(h http.Handler) string {
		s := httptest.NewUnstartedServer(h)
		s.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
		s.StartTLS()
		t.Cleanup(s.Close)
		return s.URL
	}
	openURL := start(allow)
	// httptest's servers share one certificate; it serves as the CA of
	// both checks (the serving and the client certificate's).
	ts := httptest.NewTLSServer(allow)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw})
	ts.Close()
	if err := os.WriteFile(caFile, ca, 0o600); err != nil {
		t.Fatal(err)
	}
	callers, err := certs.NewReviewCallers(caFile, "kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	refusingURL := start(callers.Require(allow))

	for _, tc := range []struct {
		name, url string
		certOnly  bool
		// want is part of the output (success) or of the error (failure).
		want    string
		wantErr bool
	}{
		{name: "open webhook", url: openURL, want: "allowed a dry-run delete of an object no Lock targets"},
		{name: "open webhook, client cert wanted", url: openURL, certOnly: true, wantErr: true,
			want: "the webhook answered HTTP 200 to a review without a client certificate, not lockguard's 403 (is --review-client-ca set?)"},
		{name: "review callers, client cert wanted", url: refusingURL, certOnly: true,
			want: "refused a review without a client certificate (--review-client-ca); the API server's own calls are not checked"},
		{name: "review callers", url: refusingURL, wantErr: true,
			want: "the webhook answered HTTP 403: lockguard answers admission reviews only from a caller with a client certificate (--review-client-ca); this call has none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--url=" + tc.url + "/validate-delete", "--ca-file=" + caFile}
			if tc.certOnly {
				args = append(args, "--want-client-cert-required")
			}
			var out bytes.Buffer
			err := checkWebhook(args, &out)
			switch {
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("err = %v, output %q; want an error containing %q", err, out.String(), tc.want)
			case !tc.wantErr && (err != nil || !strings.Contains(out.String(), tc.want)):
				t.Errorf("err = %v, output %q; want success saying %q", err, out.String(), tc.want)
			}
		})
	}
}
