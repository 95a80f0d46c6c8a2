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

	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/e2e/framework"
)

// suite is what every test shares: one control plane, one lockguard.
var suite struct {
	env     *framework.Env
	webhook *framework.LocalWebhook
	metrics string // host:port of lockguard's HTTPS metrics endpoint
}

// kube is the harness's helper vocabulary for the suite's API server.
var kube *framework.Kube

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	flag.Parse()
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
	mgr, err := env.StartManager(framework.ManagerOptions{
		Controller: controller.Options{DiscoveryInterval: 2 * time.Second},
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
