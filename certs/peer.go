package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// PeerURI is the peer identity: the URI SAN that a client certificate
// must carry, with the client-auth usage, for its holder to call the peer
// endpoints (VerifyPeer). The chart's serving Certificate sets it, and
// Authority.Issue too; any other leaf of the CA is not a replica.
const PeerURI = "spiffe://lockguard.navique.com/peer"

// CAPool is a PEM CA bundle read from a file and read again whenever the
// file changes (its modification time or size), so that a CA that
// cert-manager renews in place (kubelet swaps the Secret volume's files)
// is trusted without a restart.
type CAPool struct {
	file string

	mu   sync.Mutex
	mod  time.Time
	size int64
	pool *x509.CertPool
}

// NewCAPool reads file, which must hold at least one PEM certificate.
func NewCAPool(file string) (*CAPool, error) {
	c := &CAPool{file: file}
	if _, err := c.Pool(); err != nil {
		return nil, err
	}
	return c, nil
}

// File returns the file the pool is read from.
func (c *CAPool) File() string { return c.file }

// Pool returns the CA certificates, read again if the file changed. A file
// that changed but cannot be read or holds no certificate is an error:
// nothing is trusted rather than an older CA.
func (c *CAPool) Pool() (*x509.CertPool, error) {
	st, err := os.Stat(c.file)
	if err != nil {
		return nil, fmt.Errorf("reading the peers' CA: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pool != nil && st.ModTime().Equal(c.mod) && st.Size() == c.size {
		return c.pool, nil
	}
	pem, err := os.ReadFile(c.file)
	if err != nil {
		return nil, fmt.Errorf("reading the peers' CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", c.file)
	}
	c.pool, c.mod, c.size = pool, st.ModTime(), st.Size()
	return pool, nil
}

// verify checks chain[0] against the pool's CA for name (a DNS name, or an
// IP address checked against the certificate's IP addresses) and usage.
func (c *CAPool) verify(chain []*x509.Certificate, name string, usage x509.ExtKeyUsage) error {
	if len(chain) == 0 {
		return errors.New("no certificate")
	}
	roots, err := c.Pool()
	if err != nil {
		return err
	}
	inter := x509.NewCertPool()
	for _, ic := range chain[1:] {
		inter.AddCert(ic)
	}
	_, err = chain[0].Verify(x509.VerifyOptions{DNSName: name, Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

// PeerTLS is a replica's TLS in the peer protocol (internal/peers): the
// configuration of its calls to the other replicas, and the check of
// theirs. Both trust the replicas' CA, read again when its file changes.
type PeerTLS struct {
	// Client presents the replica's serving certificate, as a client
	// certificate, and verifies the other's serving certificate
	// (PeerClientTLS).
	Client *tls.Config
	// Authenticate checks that a call comes from another replica
	// (VerifyPeer).
	Authenticate func(*http.Request) error
}

// NewPeerTLS returns the PeerTLS of a replica whose serving certificate
// (which must allow client auth) cert holds, trusting the CA in caFile,
// or in CAName in certDir when caFile is empty, for serverName (the
// webhook Service's DNS name; empty: the IP of each address, in local
// runs). Without a readable CA it returns an error: the protocol never
// runs unauthenticated.
func NewPeerTLS(caFile, certDir, serverName string, cert *certwatcher.CertWatcher) (*PeerTLS, error) {
	if caFile == "" {
		caFile = filepath.Join(certDir, CAName)
	}
	ca, err := NewCAPool(caFile)
	if err != nil {
		return nil, err
	}
	client, err := PeerClientTLS(ca, serverName, func() (*tls.Certificate, error) { return cert.GetCertificate(nil) })
	if err != nil {
		return nil, err
	}
	return &PeerTLS{
		Client:       client,
		Authenticate: func(r *http.Request) error { return VerifyPeer(ca, serverName, r) },
	}, nil
}

// PeerClientTLS returns the TLS configuration of a replica's calls to the
// other replicas (internal/peers): it presents clientCert (the replica's
// own serving certificate, which must allow client auth) and verifies the
// other's serving certificate against ca, for serverName, or for the host
// of the address dialled when serverName is empty (an IP in local runs;
// the CA is then read once).
func PeerClientTLS(ca *CAPool, serverName string, clientCert func() (*tls.Certificate, error)) (*tls.Config, error) {
	c := &tls.Config{
		MinVersion: tls.VersionTLS12,
		ServerName: serverName,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return clientCert()
		},
	}
	if serverName == "" {
		// Verified by crypto/tls for the host dialled (an IP in local
		// runs: Go sends no SNI for one, so VerifyConnection could not
		// tell it), against the CA as it was at the start.
		pool, err := ca.Pool()
		if err != nil {
			return nil, err
		}
		c.RootCAs = pool
		return c, nil
	}
	// The standard verification is replaced by the same one against the
	// CA as it is now: the file may have been renewed since the start.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if err := ca.verify(cs.PeerCertificates, serverName, x509.ExtKeyUsageServerAuth); err != nil {
			return fmt.Errorf("the replica's serving certificate: %w", err)
		}
		return nil
	}
	return c, nil
}

// RequestClientCertificates returns an option for the webhook server's
// tls.Config that asks every client for a certificate without requiring
// one: the API server calls the admission paths without one, the other
// replicas call the peer paths with theirs (VerifyPeer checks it there).
func RequestClientCertificates() func(*tls.Config) {
	return func(c *tls.Config) { c.ClientAuth = tls.RequestClientCert }
}

// VerifyPeer authenticates a call from another replica: r must come with a
// client certificate that ca signed, that names client auth among its
// extended key usages and carries the peer identity (PeerURI), for
// serverName (the
// webhook Service's name, which every replica's certificate carries), or,
// when serverName is empty, for the IP address r came from (local runs).
func VerifyPeer(ca *CAPool, serverName string, r *http.Request) error {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return errors.New("a call from another lockguard replica needs its client certificate")
	}
	name := serverName
	if name == "" {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return fmt.Errorf("the caller's address %q: %w", r.RemoteAddr, err)
		}
		name = host
	}
	leaf := r.TLS.PeerCertificates[0]
	// crypto/x509 takes a certificate with no extended key usage as valid
	// for every usage: the usage must be there.
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return errors.New("the caller's client certificate does not allow client auth")
	}
	if !slices.ContainsFunc(leaf.URIs, func(u *url.URL) bool { return u.String() == PeerURI }) {
		return errors.New("the caller's client certificate lacks the peer identity " + PeerURI)
	}
	if err := ca.verify(r.TLS.PeerCertificates, name, x509.ExtKeyUsageClientAuth); err != nil {
		return fmt.Errorf("the caller's client certificate: %w", err)
	}
	return nil
}
