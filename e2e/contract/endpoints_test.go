package contract_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"time"
)

// waitFor polls check until it returns nil or timeout passes.
func waitFor(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endpoint is a TLS server of lockguard under attack.
type endpoint struct {
	name string
	addr string
	path string
	// tls returns a client configuration that trusts the server.
	tls func() *tls.Config
}

// webhookEndpoint is the admission webhook server; clients verify its
// certificate against the test CA.
func webhookEndpoint() endpoint {
	return endpoint{name: "webhook", addr: suite.webhook.Address(), path: "/validate-delete", tls: func() *tls.Config {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(suite.webhook.CA)
		return &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}
	}}
}

// metricsEndpoint is the metrics server, on a self-signed certificate.
func metricsEndpoint() endpoint {
	return endpoint{name: "metrics", addr: suite.metrics, path: "/metrics", tls: func() *tls.Config {
		return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}} //nolint:gosec // lockguard's self-signed metrics certificate
	}}
}

func endpoints() []endpoint { return []endpoint{webhookEndpoint(), metricsEndpoint()} }

// httpClient returns an HTTP/1.1 client for ep.
func (ep endpoint) httpClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: ep.tls()}}
}

func insecureClient() *http.Client { return metricsEndpoint().httpClient() }
