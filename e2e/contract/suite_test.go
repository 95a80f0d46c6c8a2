// Package contract_test is lockguard's in-process suite: one TestMain, one
// control plane (a real kube-apiserver and etcd, e2e/framework) and one
// lockguard manager running in this process, whose webhook the API server
// calls over TLS through the chart's ValidatingWebhookConfiguration. Its
// test files are named after what they check:
//
//   - the Lock contract (docs/contract.md), each rule once: annotations, cascade,
//     contract, crdguard, deny, eventnote, failclosed, guardscale,
//     latecrd, nsguard, observability, oddspecs, peers, quiet, scopeapi,
//     selector, status, targets, truth, upgrade;
//   - lockguard's servers against hostile or broken clients (HTTP/2 and
//     h2c, old TLS versions, oversized and trickled requests, wrong
//     content types and bodies, unauthenticated and unauthorized metrics
//     scrapes: protocol, slow, slowbody, metrics, endpoints), forged
//     reviews (forged), readiness means a complete cache (freshness) and a
//     lagging cache that still denies (lag, pages);
//   - the kubectl plugin (cmd/kubectl-lock/lockctl: kubectl lock, kubectl lock
//     list, kubectl unlock, kubectl lock why), each command in-process and
//     once through kubectl, checked with a server-side dry-run DELETE
//     (plugin, pluginselector, why, kubectl).
//
// What needs the built binary, several replicas, restarts or the garbage
// collector is in the e2e suite (package e2e, build tag e2e); the tests
// here that start the binary (forged, freshness, slowbody) give it a
// namespace and a webhook configuration of its own (ownwebhook).
//
// `go test ./...` runs it on the default Kubernetes version; `make e2e`
// runs it on the others (LOCKGUARD_KUBE_VERSION). In cluster mode
// (LOCKGUARD_E2E_MODE=cluster, make e2e-kind) it runs against the deployed
// lockguard, and the tests that need this process's control plane or
// manager skip (inProcess): every hostile-client and plugin test, and some
// of the contract's.
package contract_test

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/e2e/framework"
)

// suite is what every test shares: one control plane, one lockguard
// manager serving its webhook, metrics and probes on loopback.
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
	env, skip, err := framework.StartForMain("in-process tests")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if skip != "" {
		// Nothing to run against: every test would skip.
		fmt.Fprintln(os.Stderr, "in-process tests skipped:", skip)
		return 0
	}
	defer env.Stop()
	suite.env = env

	if kube, err = env.Kube("contract-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.requests = framework.NewRequestCounter()
	// lockguard's requests are counted (TestQuietCluster), and its Lock
	// watch goes through lagWatches, so that a test can hold back its
	// events (TestLaggingCacheStillDenies); they pass at once otherwise.
	mgr, err := env.StartManager(framework.ManagerOptions{
		Controller: controller.Options{DiscoveryInterval: 2 * time.Second},
		// Kinds of the core group, by opt-in (docs/contract.md rule 21;
		// optin_test.go): the chart's protect entries are rendered too.
		ProtectResources: optedIn,
		Wrap:             func(rt http.RoundTripper) http.RoundTripper { return suite.requests.Wrap(lagWatches(rt)) },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	suite.webhook, suite.metrics = mgr.Webhook, mgr.Metrics
	if err := installSuiteWebhook(context.Background(), mgr.Webhook); err != nil {
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

// installSuiteWebhook installs the chart pointed at wh (InstallChart), its
// webhook configuration's entries leaving out the namespaces of
// ownWebhookLabel: those have a webhook configuration of their own
// (webhookForNamespace), whose lockguard must be the only one the API
// server asks.
func installSuiteWebhook(ctx context.Context, wh *framework.LocalWebhook) error {
	objs, err := wh.RenderChart(ctx)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if o.GetKind() != "ValidatingWebhookConfiguration" {
			continue
		}
		webhooks, _, err := unstructured.NestedSlice(o.Object, "webhooks")
		if err != nil {
			return err
		}
		for _, w := range webhooks {
			// The chart's own selector (the subresource entry's) is kept,
			// the requirement added to it.
			sel, _, err := unstructured.NestedMap(w.(map[string]any), "namespaceSelector")
			if err != nil {
				return err
			}
			if sel == nil {
				sel = map[string]any{}
			}
			exprs, _, err := unstructured.NestedSlice(sel, "matchExpressions")
			if err != nil {
				return fmt.Errorf("webhook %v: %w", w.(map[string]any)["name"], err)
			}
			sel["matchExpressions"] = append(exprs, map[string]any{"key": ownWebhookLabel, "operator": "DoesNotExist"})
			w.(map[string]any)["namespaceSelector"] = sel
		}
		if err := unstructured.SetNestedSlice(o.Object, webhooks, "webhooks"); err != nil {
			return err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.ServiceAccountNamespace}}
	if err := client.IgnoreAlreadyExists(kube.Client.Create(ctx, ns)); err != nil {
		return err
	}
	return framework.Apply(ctx, kube.Client, objs...)
}

// inProcess skips a test in cluster mode: it needs the control plane or
// lockguard's manager that the suite runs itself.
func inProcess(t *testing.T) {
	t.Helper()
	if suite.env == nil {
		t.Skip("needs the suite's own control plane and in-process lockguard (not in cluster mode)")
	}
}
