// Package contract_test is the Lock contract (LOCK-SPEC), each rule once,
// against lockguard's manager running in-process on a real kube-apiserver
// and etcd (e2e/framework): the API server calls the webhook over TLS
// through the chart's ValidatingWebhookConfiguration, pointed at the
// manager. What needs the built binary, several replicas, restarts or the
// garbage collector is in the e2e suite (package e2e, build tag e2e).
//
// `go test ./...` runs it on the default Kubernetes version; `make e2e`
// runs it on the others (LOCKGUARD_KUBE_VERSION).
package contract_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/manager"
)

// suite is what every test shares: one control plane, one lockguard.
var suite struct {
	env     *framework.Env
	webhook *framework.LocalWebhook
	metrics string // host:port of lockguard's HTTPS metrics endpoint
	// requests counts lockguard's own requests to the API server.
	requests *framework.RequestCounter
}

// kube is the harness's helper vocabulary for the suite's API server.
var kube *framework.Kube

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	if framework.ClusterMode() {
		return runOnCluster(m)
	}
	env, skip, err := framework.StartForMain("contract tests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if skip != "" {
		// Nothing to run against: every test would skip.
		fmt.Fprintln(os.Stderr, "contract tests skipped:", skip)
		return 0
	}
	defer env.Stop()
	suite.env = env

	if kube, err = env.Kube("contract-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.requests = framework.NewRequestCounter()
	mgr, err := env.StartManager(framework.ManagerOptions{
		Controller: controller.Options{DiscoveryInterval: 2 * time.Second},
		Wrap:       suite.requests.Wrap,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.webhook, suite.metrics = mgr.Webhook, mgr.Metrics
	if _, err := mgr.Webhook.InstallChart(context.Background(), kube.Client); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	code := m.Run()
	if err := mgr.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
	}
	return code
}

// runOnCluster runs the suite against the cluster of $KUBECONFIG, where
// lockguard is deployed (LOCKGUARD_E2E_MODE=cluster, make e2e-kind); the
// tests that need lockguard in this process skip (inProcess).
func runOnCluster(m *testing.M) int {
	cfg, err := framework.ClusterConfig()
	if err == nil {
		var root string
		if root, err = framework.RepoRoot(); err == nil {
			err = framework.InstallSampleCRDs(cfg, root)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "contract tests on the cluster:", err)
		return 1
	}
	scheme, err := manager.NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kube = framework.NewKube(c, "", "contract-")
	if name := os.Getenv("LOCKGUARD_E2E_WEBHOOK_NAME"); name != "" {
		kube.WebhookName = name
	}
	return m.Run()
}

// inProcess skips a test in cluster mode: it needs the control plane or
// lockguard's manager that the suite runs itself.
func inProcess(t *testing.T) {
	t.Helper()
	if suite.env == nil {
		t.Skip("needs the suite's own control plane and in-process lockguard (not in cluster mode)")
	}
}
