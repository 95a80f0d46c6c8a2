//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/e2e/framework"
)

// TestConvergesAfterAPIServerRestarts restarts kube-apiserver several
// times within a minute, as a control-plane upgrade or a crash loop does,
// then creates a Lock: it must be active, its target annotated, within the
// chaos run's convergence bound (convergeWithin) of its create.
//
// Each restart fails every informer's list and watch a few times
// (connection refused while it is down, 403 while its authorizer warms).
// client-go's reflector backs off on each failure, doubling from 0.8 s to
// 30 s, jittered up to twice that, and resets only every two minutes: with
// those failures reaching the reflector, the Lock informer could wait a
// minute after the API server was back before it listed again, and the
// Lock stayed unreconciled that long (a chaos run on CI converged 43.5 s
// after its faults stopped). lockguard's caches retry those failures
// themselves (internal/readmodel's steadyListWatch).
func TestConvergesAfterAPIServerRestarts(t *testing.T) {
	const restarts = 4
	framework.Logs()
	start := time.Now()
	logf := func(format string, args ...any) {
		t.Logf("%6.1fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{CRDDirs: framework.CRDDirs(root)})
	dir := t.TempDir()
	bin, err := framework.BuildLockguard(dir)
	if err != nil {
		t.Fatal(err)
	}
	k, err := env.Kube("restarts-")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	saCfg, err := env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saCfg, kubeconfig); err != nil {
		t.Fatal(err)
	}
	ca, err := certs.NewAuthority("lockguard-restarts-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _, err := ca.Issue(servingHosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	if err := framework.ProjectSecret(certDir, map[string][]byte{certs.CertName: certPEM, certs.KeyName: keyPEM, certs.CAName: ca.CertPEM}); err != nil {
		t.Fatal(err)
	}
	set, err := framework.NewReplicaSet(&framework.LocalWebhook{CA: ca.CertPEM}, framework.ReplicaOptions{
		Binary: bin, Kubeconfig: kubeconfig, Dir: dir, Restart: true,
		CertDir: func(int) string { return certDir },
		// A Lease that outlasts each restart, so that the one replica
		// leads throughout, its informers' backoff and all (with the
		// defaults, it loses the Lease in a 10 s restart and exits, as
		// every controller-runtime leader does, and starts afresh).
		Args: []string{"--leader-election-lease-duration=90s", "--leader-election-renew-deadline=60s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = set.Stop()
		if t.Failed() {
			keep, err := os.MkdirTemp("", "lockguard-restarts-")
			if err == nil && os.CopyFS(keep, os.DirFS(dir)) == nil {
				t.Logf("lockguard logs kept in %s", keep)
			}
		}
	})
	if _, err := set.Webhook.InstallChart(ctx, k.Client); err != nil {
		t.Fatal(err)
	}
	readyCtx, cancelReady := context.WithTimeout(ctx, 2*time.Minute)
	err = set.Scale(readyCtx, 1)
	cancelReady()
	if err != nil {
		t.Fatal(err)
	}

	// Before: a Lock reconciled as usual, so every informer has synced.
	ns := k.NewNamespace(t, "restarts")
	k.CreateObject(t, framework.StackGVK, ns, "before")
	before := k.CreateLock(t, framework.NewLock(ns, "before", "Stack", "before", "restarts"))
	k.WaitActive(t, before)

	pid := set.Replicas()[0].Process().Pid()
	first := time.Now()
	for i := range restarts {
		began := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		err := env.RestartAPIServer(rctx, framework.RestartOptions{Down: time.Second, GracePeriod: apiGrace})
		cancel()
		if err != nil {
			t.Fatalf("restart %d of kube-apiserver: %v", i+1, err)
		}
		logf("restart %d: kube-apiserver back after %s", i+1, time.Since(began).Round(100*time.Millisecond))
		if i < restarts-1 {
			time.Sleep(3 * time.Second)
		}
	}
	back := time.Now()
	replica := set.Replicas()[0]
	if replica.Process().Pid() != pid {
		t.Fatalf("lockguard restarted during the API server's restarts: the test needs the one that led throughout")
	}
	framework.Eventually(t, convergeWithin, "lockguard ready after the restarts", func(context.Context) error {
		if !replica.Ready() {
			return fmt.Errorf("not ready")
		}
		return nil
	})

	// After: a new Lock on a new Stack, and the annotation on it.
	k.CreateObject(t, framework.StackGVK, ns, "after")
	after := k.CreateLock(t, framework.NewLock(ns, "after", "Stack", "after", "restarts"))
	created := time.Since(back)
	want := framework.ActiveStatus(after)
	framework.Eventually(t, convergeWithin, "Lock after active and its Stack annotated", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(after), &got); err != nil {
			return err
		}
		if !got.Status.Active {
			return fmt.Errorf("Lock %s/%s not active yet (status %+v)", ns, after.Name, got.Status)
		}
		return k.AnnotationIs(framework.StackGVK, ns, "after", after.Name)(ctx)
	})
	k.WaitLockStatus(t, after, want)
	logf("%d restarts of kube-apiserver within %s; then the Lock's create was answered %s after the last, and it was active with its target annotated %s after it",
		restarts, back.Sub(first).Round(time.Second), created.Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
}
