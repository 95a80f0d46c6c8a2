package manager

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/navique/lockguard/certs"
)

// TestPeerTLS checks the verification of the other replicas' certificates:
// against the CA file, for the Service's name, re-reading the file.
func TestPeerTLS(t *testing.T) {
	ca, err := certs.NewAuthority("peers-test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	other, err := certs.NewAuthority("other", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _, err := ca.Issue([]string{"lockguard-webhook.ns.svc"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.StartTLS()
	defer srv.Close()

	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	get := func(name string) error {
		c, err := peerTLS(PeerOptions{CAFile: caFile, ServerName: name}, dir)
		if err != nil {
			return err
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: c}}
		defer hc.CloseIdleConnections()
		resp, err := hc.Get(srv.URL)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	write := func(pem []byte) {
		if err := os.WriteFile(caFile, pem, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(ca.CertPEM)
	if err := get("lockguard-webhook.ns.svc"); err != nil {
		t.Fatalf("the right CA and name: %v", err)
	}
	if err := get("another.ns.svc"); err == nil {
		t.Fatal("a certificate for another name was accepted")
	}
	// One client: the CA file is read again for each new connection.
	c, err := peerTLS(PeerOptions{CAFile: caFile, ServerName: "lockguard-webhook.ns.svc"}, dir)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{TLSClientConfig: c, DisableKeepAlives: true}
	hc := &http.Client{Transport: tr}
	if resp, err := hc.Get(srv.URL); err != nil {
		t.Fatalf("before the CA changed: %v", err)
	} else {
		resp.Body.Close()
	}
	write(other.CertPEM)
	if resp, err := hc.Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatal("a certificate of a CA no longer in the file was accepted")
	}
}
