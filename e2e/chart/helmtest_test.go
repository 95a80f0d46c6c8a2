package chart_test

import (
	"bytes"
	"context"
	"encoding/base64"
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
	bin, lg := startLockguard(ctx, t, env, wh)

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
// webhook at wh, until the test ends; it returns once lockguard is ready.
func startLockguard(ctx context.Context, t *testing.T, env *framework.Env, wh *framework.LocalWebhook) (string, *framework.Lockguard) {
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
	lg, err := framework.StartLockguard(framework.LockguardOptions{Binary: bin, Kubeconfig: kubeconfig, Webhook: wh, Dir: env.Dir, Logs: framework.Logs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lg.Stop(time.Minute) })
	if err := lg.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return bin, lg
}
