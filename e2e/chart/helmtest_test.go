//go:build e2e

package chart_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestCheckWebhook runs `lockguard check-webhook`, what the chart's helm
// test Pod runs, against the lockguard binary serving on a real API server
// (as its ServiceAccount, with the chart's RBAC): it succeeds while
// lockguard answers, and fails when the CA is not the one that signed
// lockguard's certificate, when the URL is not the webhook's, and once
// lockguard is stopped. The Pod itself runs only in a cluster with a kubelet
// and the image (make e2e-kind); TestInstall creates it on the API server.
// Meanwhile the same lockguard, with the chart's metrics flags, is scraped
// as the chart's ServiceMonitor scrapes it (testScrape).
func TestCheckWebhook(t *testing.T) {
	requireHelm(t)
	kubeVersions(t) // skips (or fails under LOCKGUARD_REQUIRE_KUBE) without a cached control plane
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	env := framework.StartForTest(t, framework.Options{CRDDirs: []string{repoFile(t, "deploy/chart/lockguard/crds"), repoFile(t, "e2e/testdata/crds/stacks.yaml")}})
	k, err := env.Kube("check-")
	if err != nil {
		t.Fatal(err)
	}
	wh, err := framework.NewLocalWebhook(env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wh.InstallChart(ctx, k.Client); err != nil {
		t.Fatal(err)
	}
	metricsPort, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", metricsPort)
	// Metrics as the chart serves them: HTTPS with the webhook's serving
	// certificate, for authorized callers only.
	bin, lg := startLockguard(ctx, t, env, wh,
		"--metrics-bind-address="+metrics, "--metrics-secure=true", "--metrics-cert-dir="+wh.CertDir)

	caFile := filepath.Join(env.Dir, "ca.crt")
	if err := os.WriteFile(caFile, wh.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	other, err := framework.NewLocalWebhook(env.Dir) // another self-signed CA
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + wh.Address() + webhook.Path
	check := func(args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, append([]string{"check-webhook", "--namespace=check"}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		t.Logf("lockguard check-webhook %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
		return stdout.String() + stderr.String(), err
	}

	t.Run("metrics-scrape", func(t *testing.T) { testScrape(ctx, t, k, metrics, wh.CA, other.CA) })

	for name, args := range map[string][]string{
		"ca-file":   {"--url=" + url, "--ca-file=" + caFile},
		"ca-bundle": {"--url=" + url, "--ca-bundle=" + base64.StdEncoding.EncodeToString(wh.CA)},
	} {
		out, err := check(args...)
		if err != nil || !strings.Contains(out, "answered") {
			t.Errorf("%s: lockguard check-webhook against a ready lockguard: %v, %q; want success", name, err, out)
		}
	}
	fails := map[string]struct {
		args []string
		want string
	}{
		"another CA":     {[]string{"--url=" + url, "--ca-bundle=" + base64.StdEncoding.EncodeToString(other.CA)}, "certificate"},
		"not a webhook":  {[]string{"--url=https://" + wh.Address() + "/nothing-here", "--ca-file=" + caFile}, "HTTP 404"},
		"no CA":          {[]string{"--url=" + url}, "--ca-file or --ca-bundle is required"},
		"not HTTPS":      {[]string{"--url=http://" + wh.Address() + webhook.Path, "--ca-file=" + caFile}, "want an https URL"},
		"another server": {[]string{"--url=https://" + lg.ProbeAddr + "/readyz", "--ca-file=" + caFile}, "did not answer"},
	}
	for name, tc := range fails {
		out, err := check(tc.args...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%s: lockguard check-webhook: %v, %q; want it to fail with %q", name, err, out, tc.want)
		}
	}

	// Once lockguard is gone, the check fails.
	if err := lg.Stop(time.Minute); err != nil {
		t.Logf("stopping lockguard: %v", err)
	}
	if out, err := check("--url="+url, "--ca-file="+caFile, "--timeout=5s"); err == nil || !strings.Contains(out, "did not answer") {
		t.Errorf("lockguard stopped: lockguard check-webhook: %v, %q; want it to fail", err, out)
	}
}

// startLockguard builds the lockguard binary and runs it as the chart's
// ServiceAccount (so with the RBAC of the chart installed), serving the
// webhook at wh, with extra flags args, until the test ends; it returns
// once lockguard is ready.
func startLockguard(ctx context.Context, t *testing.T, env *framework.Env, wh *framework.LocalWebhook, args ...string) (string, *framework.Lockguard) {
	t.Helper()
	bin, err := framework.BuildLockguard(env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	saCfg, err := env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(env.Dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saCfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	lg, err := framework.StartLockguard(framework.LockguardOptions{Binary: bin, Kubeconfig: kubeconfig, Webhook: wh, Dir: env.Dir, Logs: framework.Logs(), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lg.Stop(time.Minute) })
	if err := lg.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return bin, lg
}

// testScrape scrapes lockguard's metrics as the chart's ServiceMonitor
// makes Prometheus do: TLS verified with the CA of the serving certificate
// (lockguard serves metrics with it), and a bearer token of an identity
// allowed to get /metrics. A stranger's token is refused, and so is a
// server certificate checked against another CA.
func testScrape(ctx context.Context, t *testing.T, k *framework.Kube, address string, ca, otherCA []byte) {
	allowed, denied := k.ScraperTokens(t)
	get := func(ca []byte, token string) (int, string, error) {
		t.Helper()
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(ca) {
			t.Fatal("no CA certificate")
		}
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+address+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	if code, body, err := get(ca, allowed); err != nil || code != http.StatusOK || !strings.Contains(body, "lockguard_serving_certificate_expiry_timestamp_seconds") {
		t.Errorf("scraping with the serving certificate's CA and an allowed token: %d, %v (%.100q); want 200 with lockguard's metrics", code, err, body)
	}
	if code, _, err := get(ca, denied); err != nil || code != http.StatusForbidden {
		t.Errorf("scraping with a stranger's token: %d, %v; want 403", code, err)
	}
	if _, _, err := get(otherCA, allowed); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("scraping with another CA: %v; want a certificate verification error", err)
	}
}
