package certs

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestGenerateSelfSigned checks the chain: the serving certificate is for
// the hosts, verifies against the CA, and a renewal from the same Authority
// has a new key.
func TestGenerateSelfSigned(t *testing.T) {
	ss, err := GenerateSelfSigned([]string{"127.0.0.1", "lockguard-webhook.lockguard-system.svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(ss.Cert, ss.Key)
	if err != nil {
		t.Fatalf("the certificate and key do not match: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(ss.CACert) {
		t.Fatal("ca.crt is not a PEM certificate")
	}
	leaf := pair.Leaf
	for _, host := range []string{"127.0.0.1", "lockguard-webhook.lockguard-system.svc"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
			t.Errorf("verifying for %s: %v", host, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: "other.example"}); err == nil {
		t.Error("the certificate verifies for a host it was not issued for")
	}

	ca, err := NewAuthority("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c1, k1, s1, err := ca.Issue([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c2, k2, s2, err := ca.Issue([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if string(k1) == string(k2) || string(c1) == string(c2) || s1.Cmp(s2) == 0 {
		t.Error("two issued certificates share a key, a certificate or a serial")
	}
}

func TestServerTLS(t *testing.T) {
	for _, tc := range []struct {
		http2 bool
		want  []string
	}{{false, []string{"http/1.1"}}, {true, []string{"h2"}}} {
		c := &tls.Config{NextProtos: []string{"h2"}}
		ServerTLS(tc.http2)(c)
		if c.MinVersion != tls.VersionTLS12 {
			t.Errorf("ServerTLS(%v): MinVersion %x, want TLS 1.2", tc.http2, c.MinVersion)
		}
		if diff := cmp.Diff(tc.want, c.NextProtos); diff != "" {
			t.Errorf("ServerTLS(%v): NextProtos -want, +got:\n%s", tc.http2, diff)
		}
	}
}

// TestWatcherAndExpiry loads a certificate directory, serves it through
// WithCertificate, and reports its expiry.
func TestWatcherAndExpiry(t *testing.T) {
	dir := t.TempDir()
	ss, err := GenerateSelfSigned([]string{"127.0.0.1"}, 48*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := ss.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{CertName, KeyName, CAName} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("WriteDir did not write %s: %v", name, err)
		}
	}
	w, err := NewWatcher(dir)
	if err != nil {
		t.Fatal(err)
	}
	c := &tls.Config{}
	WithCertificate(w)(c)
	served, err := c.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ss.Cert)
	if string(served.Certificate[0]) != string(block.Bytes) {
		t.Error("the watcher serves another certificate than the one in the directory")
	}

	leaf, _ := x509.ParseCertificate(block.Bytes)
	want := "# HELP lockguard_serving_certificate_expiry_timestamp_seconds Expiry (NotAfter, Unix seconds) of the webhook serving certificate currently loaded.\n" +
		"# TYPE lockguard_serving_certificate_expiry_timestamp_seconds gauge\n" +
		"lockguard_serving_certificate_expiry_timestamp_seconds " + formatFloat(float64(leaf.NotAfter.Unix())) + "\n"
	if err := testutil.CollectAndCompare(NewExpiryCollector(w), strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	if _, err := NewWatcher(t.TempDir()); err == nil || !strings.Contains(err.Error(), "want tls.crt and tls.key") {
		t.Errorf("NewWatcher on an empty directory: error %v, want one naming tls.crt and tls.key", err)
	}
}

// formatFloat formats f as the Prometheus text format does.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'e', -1, 64) }
