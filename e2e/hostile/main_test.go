// Package hostile_test attacks lockguard's servers the way a hostile or
// broken client would: HTTP/2 and h2c, old TLS versions, oversized and
// trickled requests, wrong content types and bodies, unauthenticated and
// unauthorized metrics scrapes. The servers are the real ones, built by
// internal/manager.New and running in-process against a real kube-apiserver
// (e2e/framework). It also checks that a lockguard binary started while
// Locks exist denies their targets' deletes from its first ready moment.
package hostile_test

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/navique/lockguard/e2e/framework"
)

// suite is what every test shares: one control plane and one lockguard
// manager serving its webhook, metrics and probes on loopback.
var suite struct {
	env     *framework.Env
	webhook *framework.LocalWebhook
	metrics string // host:port of the HTTPS metrics endpoint
	skip    string
}

// kube is the harness's helper vocabulary for the suite's API server.
var kube *framework.Kube

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	env, skip, err := framework.StartForMain("hostile-client tests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if skip != "" {
		suite.skip = skip
		return m.Run()
	}
	defer env.Stop()
	suite.env = env
	if kube, err = env.Kube("hostile-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// lockguard's Lock watch goes through lagWatches, so that a test can
	// hold back its events.
	mgr, err := env.StartManager(framework.ManagerOptions{Wrap: lagWatches})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.webhook, suite.metrics = mgr.Webhook, mgr.Metrics
	code := m.Run()
	if err := mgr.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

// requireSuite skips a test when the control plane is not there (and
// LOCKGUARD_REQUIRE_KUBE is not set).
func requireSuite(t *testing.T) {
	t.Helper()
	if suite.skip != "" {
		t.Skip(suite.skip)
	}
}

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
