package webhook

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/utils/ptr"

	"github.com/navique/lockguard/certs"
)

// TestForgedReviewsLearnNothing is issue 36's item 5 on the review paths:
// a review names its requesting user as its sender claims, so a pod that
// reaches the webhook port can forge the DELETE of any object and read,
// in the denial, the names and reasons of the Locks of any namespace.
// With --review-client-ca (certs.ReviewCallers) lockguard answers a review
// only over TLS with a client certificate of that CA, as the API server
// presents one when its AdmissionConfiguration gives it to the webhook:
// the forger, without it, is refused before its review is read and
// learns nothing; the API server's review is answered as before. Real
// TLS on loopback.
func TestForgedReviewsLearnNothing(t *testing.T) {
	ca, err := certs.NewAuthority("review-callers", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewAuthority("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair := func(a *certs.Authority, host string) tls.Certificate {
		certPEM, keyPEM, _, err := a.Issue([]string{host}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		p, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := filepath.Join(t.TempDir(), certs.CAName)
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	callers, err := certs.NewReviewCallers(caFile, "kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(h http.Handler) string {
		srv := httptest.NewUnstartedServer(h)
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair(ca, "127.0.0.1")}}
		certs.RequestClientCertificates()(srv.TLS)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	handler := NewHandler(Config{Locks: indexOf(t, forgeStack, lock("quarterly-close", "finance freeze until the audit"))})
	open, guarded := serve(handler), serve(callers.Require(handler))

	const (
		denial = "resource is protected by Lock(s) [quarterly-close]; delete the Lock(s) before deleting this resource (quarterly-close: finance freeze until the audit)"
		prefix = "lockguard answers admission reviews only from a caller with a client certificate"
	)
	type answer struct {
		HTTP   int
		Body   string // the HTTP body of a refusal
		Denial string // the review's message, on HTTP 200
	}
	cases := map[string]struct {
		reason string
		url    string
		cert   *tls.Certificate
		want   answer
	}{
		"WithoutTheOption": {
			reason: "Without --review-client-ca, a forged review learns the Lock's name and reason (docs/hostile-clients.md says so; the NetworkPolicy limits who can send one).",
			url:    open,
			want:   answer{HTTP: http.StatusOK, Denial: denial},
		},
		"NoCertificate": {
			reason: "The forger presents no certificate: refused before the review is read.",
			url:    guarded,
			want:   answer{HTTP: http.StatusForbidden, Body: prefix + " (--review-client-ca); this call has none\n"},
		},
		"AnotherCA": {
			reason: "A certificate of another CA is refused.",
			url:    guarded, cert: ptr.To(pair(other, "kube-apiserver")),
			want: answer{HTTP: http.StatusForbidden, Body: prefix + " of --review-client-ca: x509: certificate signed by unknown authority\n"},
		},
		"AnotherName": {
			reason: "A certificate of the CA for another name (a replica's serving certificate) is refused.",
			url:    guarded, cert: ptr.To(pair(ca, "lockguard-webhook.ns.svc")),
			want: answer{HTTP: http.StatusForbidden, Body: prefix + " of --review-client-ca: x509: certificate is valid for lockguard-webhook.ns.svc, not kube-apiserver\n"},
		},
		"TheAPIServer": {
			reason: "The API server's client certificate: the review is answered as before.",
			url:    guarded, cert: ptr.To(pair(ca, "kube-apiserver")),
			want: answer{HTTP: http.StatusOK, Denial: denial},
		},
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
			if tc.cert != nil {
				cfg.Certificates = []tls.Certificate{*tc.cert}
			}
			hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
			res, err := hc.Post(tc.url+Path, "application/json", strings.NewReader(reviewJSON("admission.k8s.io/v1", "forge", "{}")))
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
			if err != nil {
				t.Fatal(err)
			}
			got := answer{HTTP: res.StatusCode}
			if res.StatusCode != http.StatusOK {
				got.Body = string(body)
			} else {
				var review admissionv1.AdmissionReview
				if err := json.Unmarshal(body, &review); err != nil || review.Response == nil || review.Response.Result == nil {
					t.Fatalf("%s\nanswer %q is not a review with a result: %v", tc.reason, body, err)
				}
				got.Denial = review.Response.Result.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nPOST %s: -want, +got:\n%s", tc.reason, Path, diff)
			}
		})
	}
}
