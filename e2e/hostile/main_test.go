//go:build e2e

package hostile

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/discovery"

	"github.com/navique/lockguard/e2e/framework"
)

// Environment variables of the package.
const (
	// envBinary is the lockguard binary to attack; default bin/lockguard
	// (as the e2e suite's).
	envBinary = "LOCKGUARD_E2E_BINARY"
	// envReport is a file the package writes its measurements to (go test
	// hides a passing package's output; make e2e prints it).
	envReport = "LOCKGUARD_HOSTILE_REPORT"
)

// measurements are what the tests report, for the summary.
var measurements struct {
	sync.Mutex
	lines []string
}

// report logs a measurement and keeps it for the summary.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	measurements.Lock()
	defer measurements.Unlock()
	measurements.lines = append(measurements.lines, t.Name()+": "+line)
}

// target is what every scenario attacks: one lockguard process behind the
// chart's webhook configuration, which the API server calls directly.
var target struct {
	lg *framework.Lockguard
	// tls verifies the webhook's serving certificate.
	tls *tls.Config
	// version is the API server's, e.g. v1.29.15.
	version string
	// binary is the path of the lockguard binary.
	binary string
	// pprof serves its /debug/pprof/ endpoints.
	pprof string
}

// kube is the harness's vocabulary for the control plane's admin.
var kube *framework.Kube

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	env, skip, err := framework.StartForMain("e2e/hostile")
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "e2e/hostile:", err)
		return 1
	case skip != "":
		fmt.Println("e2e/hostile:", skip)
		return 0
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e/hostile: stopping the control plane:", err)
		}
	}()
	logs, err := setup(env)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/hostile: setup failed:", err)
		printTail(logs, 60)
		return 1
	}
	fmt.Printf("e2e/hostile: Kubernetes %s, setup took %s\n", target.version, time.Since(start).Round(time.Millisecond))
	code := m.Run()
	if err := target.lg.Stop(30 * time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/hostile: stopping lockguard:", err)
		code = 1
	}
	if code != 0 {
		printTail(logs, 60)
	}
	measurements.Lock()
	summary := fmt.Sprintf("e2e/hostile: Kubernetes %s, lockguard %s:\n  %s\ne2e/hostile: Kubernetes %s: took %s\n", target.version, target.binary,
		strings.Join(measurements.lines, "\n  "), target.version, time.Since(start).Round(time.Second))
	measurements.Unlock()
	fmt.Print(summary)
	if path := os.Getenv(envReport); path != "" {
		if err := os.WriteFile(path, []byte(summary), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "e2e/hostile: writing the report:", err)
		}
	}
	return code
}

// setup installs the chart as rendered for a local run (its RBAC, its
// webhook configuration calling the binary directly) and starts the
// binary as lockguard's ServiceAccount, alone (the peer protocol's
// standalone mode). It returns the path of lockguard's log.
func setup(env *framework.Env) (string, error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return "", err
	}
	binary := os.Getenv(envBinary)
	if binary == "" {
		binary = filepath.Join(root, "bin", "lockguard")
	}
	target.binary = binary
	if _, err := os.Stat(binary); err != nil {
		return "", fmt.Errorf("the lockguard binary is missing: run `make build` first: %w", err)
	}
	if kube, err = env.Kube("hostile-"); err != nil {
		return "", err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
	if err != nil {
		return "", err
	}
	v, err := dc.ServerVersion()
	if err != nil {
		return "", err
	}
	target.version = v.GitVersion
	wh, err := framework.NewLocalWebhook(env.Dir)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := wh.InstallChart(ctx, kube.Client); err != nil {
		return "", err
	}
	sa, err := env.ServiceAccountConfig()
	if err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(env.Dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(sa, kubeconfig); err != nil {
		return "", err
	}
	logPath := filepath.Join(env.Dir, "lockguard.log")
	logs, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	// The profiler, on loopback, to collect garbage before the heap is
	// measured (heapAfterGC).
	pprofPort, err := framework.FreePort()
	if err != nil {
		return "", err
	}
	target.pprof = "127.0.0.1:" + strconv.Itoa(pprofPort)
	lg, err := framework.StartLockguard(framework.LockguardOptions{
		Binary: binary, Kubeconfig: kubeconfig, Webhook: wh, Dir: env.Dir, Metrics: true, Logs: logs,
		Args: []string{"--pprof-bind-address=" + target.pprof, "--pending-ttl=" + pendingTTL.String()},
	})
	if err != nil {
		return logPath, err
	}
	target.lg = lg
	if err := lg.WaitReady(ctx); err != nil {
		return logPath, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(wh.CA)
	target.tls = &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}, MinVersion: tls.VersionTLS12}
	return logPath, nil
}

// printTail prints the last n lines of the file at path (lockguard's log:
// the control plane's scratch directory goes with it).
func printTail(path string, n int) {
	if path == "" {
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	fmt.Fprintf(os.Stderr, "e2e/hostile: the last %d lines of lockguard's log:\n%s\n", n, strings.Join(lines[max(0, len(lines)-n):], "\n"))
}
