package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"net/http"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestVerifyPeerIdentity: a peer call is accepted only with a client
// certificate of the CA that carries the client-auth usage and the peer
// identity (PeerURI), for the Service's name; any other leaf of the CA for
// that name is refused (issue 36).
func TestVerifyPeerIdentity(t *testing.T) {
	ca, err := NewAuthority("peers-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := t.TempDir() + "/" + CAName
	if err := os.WriteFile(caFile, ca.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := NewCAPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	const name = "lockguard-webhook.ns.svc"
	peer, _ := url.Parse(PeerURI)
	other, _ := url.Parse("spiffe://lockguard.navique.com/not-a-peer")
	leaf := func(eku []x509.ExtKeyUsage, uris ...*url.URL) *x509.Certificate {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: "x"}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: eku, DNSNames: []string{name}, URIs: uris}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
		if err != nil {
			t.Fatal(err)
		}
		c, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	issued, _, _, err := ca.Issue([]string{name}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	both := []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	for n, tc := range map[string]struct {
		reason string
		cert   *x509.Certificate
		err    string
	}{
		"issued": {reason: "Authority.Issue's certificates (local runs, tests) carry the identity", cert: parsePEM(t, issued)},
		"peer":   {reason: "client auth and the peer identity", cert: leaf(both, peer)},
		"client only": {reason: "a separate client certificate of the peer identity is a peer too",
			cert: leaf([]x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, peer)},
		"no EKU": {reason: "a leaf with no extended key usage is valid for any usage to crypto/x509, not a peer",
			cert: leaf(nil, peer), err: "the caller's client certificate does not allow client auth"},
		"server only": {reason: "a serving certificate of the CA is not a client",
			cert: leaf([]x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, peer), err: "the caller's client certificate does not allow client auth"},
		"no identity": {reason: "any other leaf of the CA for the Service's name is not a peer",
			cert: leaf(both), err: "the caller's client certificate lacks the peer identity " + PeerURI},
		"other identity": {reason: "another URI is not the peer identity",
			cert: leaf(both, other), err: "the caller's client certificate lacks the peer identity " + PeerURI},
	} {
		r := &http.Request{RemoteAddr: "127.0.0.1:1", TLS: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{tc.cert}}}
		got := ""
		if err := VerifyPeer(pool, name, r); err != nil {
			got = err.Error()
		}
		if diff := cmp.Diff(tc.err, got); diff != "" {
			t.Errorf("%s: %s\nVerifyPeer(): -want, +got:\n%s", n, tc.reason, diff)
		}
	}
}

// parsePEM parses the first certificate of data.
func parsePEM(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	b, _ := pem.Decode(data)
	if b == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
