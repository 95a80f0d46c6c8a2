//go:build e2e

package chart_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestCheckWebhookReviewCallers runs the helm test Pod's check-webhook, as
// the chart renders it with webhook.reviewCallers on, against the
// lockguard binary started with the Deployment's --review-client-* flags
// (the CA file at a local path): it succeeds, since lockguard refuses its
// review, which carries no client certificate, with the 403 of
// --review-client-ca; without --want-client-cert-required the same
// refusal fails the check.
func TestCheckWebhookReviewCallers(t *testing.T) {
	requireHelm(t)
	kubeVersions(t) // skips (or fails under LOCKGUARD_REQUIRE_KUBE) without a cached control plane
	_, flags, testFlags := reviewCallerFlags(t, framework.Release{Set: []string{
		"webhook.reviewCallers.enabled=true", "webhook.reviewCallers.name=kube-apiserver"}})
	if len(flags) != 2 || len(testFlags) != 1 {
		t.Fatalf("rendered --review-client-* flags %v, helm test flags %v; want two and one", flags, testFlags)
	}
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
	caFile := filepath.Join(env.Dir, "ca.crt")
	if err := os.WriteFile(caFile, wh.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	// The chart's flags, with the CA where this test wrote it.
	args := []string{"--review-client-ca=" + caFile, flags[1]}
	bin, _ := startLockguard(ctx, t, env, wh, args...)

	url := "https://" + wh.Address() + webhook.Path
	check := func(args ...string) (string, error) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		cmd := exec.CommandContext(ctx, bin, append([]string{"check-webhook", "--namespace=check", "--url=" + url, "--ca-file=" + caFile}, args...)...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		t.Logf("lockguard check-webhook %v: %v\nstdout: %s\nstderr: %s", args, err, stdout.String(), stderr.String())
		return stdout.String() + stderr.String(), err
	}
	if out, err := check(testFlags...); err != nil || !strings.Contains(out, "refused a review without a client certificate (--review-client-ca)") {
		t.Errorf("check-webhook %v against lockguard with %v: %v, %q; want success", testFlags, args, err, out)
	}
	want := "the webhook answered HTTP 403: lockguard answers admission reviews only from a caller with a client certificate (--review-client-ca); this call has none"
	if out, err := check(); err == nil || !strings.Contains(out, want) {
		t.Errorf("check-webhook against lockguard with %v: %v, %q; want it to fail with %q", args, err, out, want)
	}
}
