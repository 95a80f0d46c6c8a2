package certs

import (
	"crypto/tls"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPeerTLS checks both ends of a call between replicas: the caller
// verifies the serving certificate against the CA file, for the Service's
// name, reading the file again when it changes; the server accepts only a
// client certificate of that CA, for that name and for client auth.
func TestPeerTLS(t *testing.T) {
	ca, err := NewAuthority("peers-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewAuthority("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const name = "lockguard-webhook.ns.svc"
	pairOf := func(a *Authority, host string) tls.Certificate {
		certPEM, keyPEM, _, err := a.Issue([]string{host}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	serving := pairOf(ca, name)
	dir := t.TempDir()
	caFile := filepath.Join(dir, CAName)
	write := func(pem []byte) {
		// A later modification time, as kubelet's swap of the volume gives.
		if err := os.WriteFile(caFile, pem, 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Duration(len(pem)) * time.Millisecond)
		if err := os.Chtimes(caFile, later, later); err != nil {
			t.Fatal(err)
		}
	}
	write(ca.CertPEM)
	pool, err := NewCAPool(caFile)
	if err != nil {
		t.Fatal(err)
	}
	var verifyErr error
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		verifyErr = VerifyPeer(pool, name, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	RequestClientCertificates()(srv.TLS)
	srv.StartTLS()
	defer srv.Close()

	call := func(serverName string, client *tls.Certificate) error {
		t.Helper()
		c, err := PeerClientTLS(pool, serverName, func() (*tls.Certificate, error) {
			if client == nil {
				return &tls.Certificate{}, nil
			}
			return client, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c, DisableKeepAlives: true}}
		resp, err := hc.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := call(name, &serving); err != nil || verifyErr != nil {
		t.Fatalf("the right CA and name: call %v, server's verification %v", err, verifyErr)
	}
	if err := call("another.ns.svc", &serving); err == nil {
		t.Fatal("a serving certificate for another name was accepted")
	}
	for what, client := range map[string]*tls.Certificate{
		"no client certificate":                 nil,
		"a client certificate of another CA":    ptr(pairOf(other, name)),
		"a client certificate for another name": ptr(pairOf(ca, "someone.else.svc")),
	} {
		verifyErr = nil
		if err := call(name, client); err != nil {
			t.Fatalf("%s: the call failed before the server could refuse it: %v", what, err)
		}
		if verifyErr == nil {
			t.Errorf("%s: VerifyPeer accepted the caller", what)
		}
	}
	// The CA file is read again once it changes.
	write(other.CertPEM)
	if err := call(name, &serving); err == nil {
		t.Fatal("a certificate of a CA no longer in the file was accepted")
	}
}

func ptr[T any](v T) *T { return &v }

// TestNewPeerTLS: a replica's peer TLS trusts the CA of its certificate
// directory by default, presents its serving certificate, and accepts
// the same from another replica; without a CA there is no peer TLS.
func TestNewPeerTLS(t *testing.T) {
	const name = "lockguard-webhook.ns.svc"
	s, err := GenerateSelfSigned([]string{name}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := s.WriteDir(dir); err != nil {
		t.Fatal(err)
	}
	cert, err := NewWatcher(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewPeerTLS(filepath.Join(dir, "missing.crt"), dir, name, cert); err == nil {
		t.Error("NewPeerTLS with a CA file that does not exist: no error")
	}
	if _, err := NewPeerTLS("", t.TempDir(), name, cert); err == nil {
		t.Error("NewPeerTLS with no ca.crt in the certificate directory: no error")
	}
	p, err := NewPeerTLS("", dir, name, cert)
	if err != nil {
		t.Fatal(err)
	}
	verifyErr := errors.New("not called")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		verifyErr = p.Authenticate(r)
	}))
	srv.TLS = &tls.Config{GetCertificate: cert.GetCertificate}
	RequestClientCertificates()(srv.TLS)
	srv.StartTLS()
	defer srv.Close()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: p.Client, DisableKeepAlives: true}}
	resp, err := hc.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if verifyErr != nil {
		t.Errorf("a replica's call to another, both with the directory's certificate: %v", verifyErr)
	}
}
