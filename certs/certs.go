// Package certs owns lockguard's serving-certificate plumbing: the TLS
// settings of the webhook server, reloading a renewed certificate from the
// certificate directory without a restart, the mutual TLS between replicas
// of the peer protocol (PeerTLS: the client side and the check of a
// caller, peer.go), and, for local runs and tests, a self-signed CA and
// serving certificate.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// File names in a certificate directory, as cert-manager writes them into a
// Secret and kubelet projects the Secret into a volume.
const (
	CertName = "tls.crt"
	KeyName  = "tls.key"
	CAName   = "ca.crt"
)

// ServerTLS returns an option for a server's tls.Config: TLS 1.2 or newer,
// and HTTP/1.1 only unless enableHTTP2 (HTTP/2 stays off by default, see
// CVE-2023-44487 and CVE-2023-39325).
func ServerTLS(enableHTTP2 bool) func(*tls.Config) {
	return func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		if !enableHTTP2 {
			c.NextProtos = []string{"http/1.1"}
		}
	}
}

// NewWatcher returns a certificate watcher for tls.crt and tls.key in dir.
// It reloads them when they change (through fsnotify and polling, so the
// atomic ..data symlink swap kubelet does on Secret volumes is seen). Add it
// to the manager as a Runnable and serve its GetCertificate.
func NewWatcher(dir string) (*certwatcher.CertWatcher, error) {
	w, err := certwatcher.New(filepath.Join(dir, CertName), filepath.Join(dir, KeyName))
	if err != nil {
		return nil, fmt.Errorf("loading the serving certificate from %s (want %s and %s): %w", dir, CertName, KeyName, err)
	}
	return w, nil
}

// WithCertificate returns an option that makes a server's tls.Config serve
// the watcher's current certificate.
func WithCertificate(w *certwatcher.CertWatcher) func(*tls.Config) {
	return func(c *tls.Config) { c.GetCertificate = w.GetCertificate }
}

// SelfSigned is a self-signed CA and a serving certificate it signed, PEM
// encoded.
type SelfSigned struct {
	CACert []byte
	Cert   []byte
	Key    []byte
}

// GenerateSelfSigned creates a CA and a serving certificate for hosts (DNS
// names or IP addresses), valid for validFor. Keys are ECDSA P-256.
func GenerateSelfSigned(hosts []string, validFor time.Duration) (*SelfSigned, error) {
	ca, err := NewAuthority("lockguard-ca", validFor)
	if err != nil {
		return nil, err
	}
	cert, key, _, err := ca.Issue(hosts, validFor)
	if err != nil {
		return nil, err
	}
	return &SelfSigned{CACert: ca.CertPEM, Cert: cert, Key: key}, nil
}

// Authority is a self-signed CA that issues serving certificates, for local
// runs and tests (renewals issue a new key from the same CA, as cert-manager
// does).
type Authority struct {
	// Cert is the CA certificate, CertPEM the same PEM encoded.
	Cert    *x509.Certificate
	CertPEM []byte
	key     *ecdsa.PrivateKey
}

// NewAuthority creates a CA named commonName, valid for validFor, with an
// ECDSA P-256 key.
func NewAuthority(commonName string, validFor time.Duration) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("signing the CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}, nil
}

// Issue signs a serving (and peer client: client auth and PeerURI)
// certificate for hosts (DNS names or IP addresses)
// with a new ECDSA P-256 key, valid for validFor. It returns the
// certificate and key PEM encoded, and the certificate's serial number.
func (a *Authority) Issue(hosts []string, validFor time.Duration) (certPEM, keyPEM []byte, serialNumber *big.Int, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating the serving key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: "lockguard"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		// Client auth too: a replica presents its serving certificate
		// when it calls the others (internal/peers).
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		// The peer identity (VerifyPeer), which the chart's Certificate
		// sets too.
		URIs: []*url.URL{peerURL},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("signing the serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), tmpl.SerialNumber, nil
}

// WriteDir writes tls.crt, tls.key and ca.crt into dir, creating it. Each
// file is replaced atomically (written aside, then renamed).
func (s *SelfSigned) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for name, data := range map[string][]byte{CertName: s.Cert, KeyName: s.Key, CAName: s.CACert} {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// peerURL is PeerURI parsed.
var peerURL = func() *url.URL {
	u, err := url.Parse(PeerURI)
	if err != nil {
		panic(err) // a constant
	}
	return u
}()

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return n
}
