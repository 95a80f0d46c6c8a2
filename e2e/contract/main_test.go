// Package integration_test runs lockguard's manager in-process against a
// real kube-apiserver and etcd: the API server calls the webhook over TLS
// through the chart's ValidatingWebhookConfiguration, and the tests
// check the contract's core rules end to end.
package contract_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/manager"
)

// suite is what every test shares: one control plane, one lockguard.
var suite struct {
	env        *framework.Env
	cfg        *rest.Config
	client     client.Client
	kubeconfig string
	root       string
	webhook    *framework.LocalWebhook
	metrics    string // host:port of lockguard's HTTPS metrics endpoint
	skip       string
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
	env, skip, err := framework.StartForMain("integration tests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if skip != "" {
		suite.skip = skip
		return m.Run()
	}
	defer env.Stop()
	if suite.root, err = framework.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.env, suite.cfg = env, env.Config

	scheme, err := manager.NewScheme()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.client, err = client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.kubeconfig = filepath.Join(env.Dir, "admin.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, suite.kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	mgr, err := env.StartManager(framework.ManagerOptions{
		Controller: controller.Options{DiscoveryInterval: 2 * time.Second},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.webhook, suite.metrics = mgr.Webhook, mgr.Metrics
	if _, err := mgr.Webhook.InstallChart(context.Background(), suite.client); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
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
