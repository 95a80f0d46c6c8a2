//go:build e2e

package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// Environment variables of the suite.
const (
	// envMode selects the mode: "local" (default) or "cluster".
	envMode = "LOCKGUARD_E2E_MODE"
	// envNamespace is lockguard's namespace in cluster mode; default lockguard-system.
	envNamespace = "LOCKGUARD_E2E_NAMESPACE"
	// envDeployment is lockguard's Deployment in cluster mode; default lockguard.
	envDeployment = "LOCKGUARD_E2E_DEPLOYMENT"
	// envWebhookName is the name of lockguard's webhook in the
	// ValidatingWebhookConfiguration; default delete.lockguard.core.navique.com.
	envWebhookName = "LOCKGUARD_E2E_WEBHOOK_NAME"
	// envBinary is the lockguard binary run in local mode; default bin/lockguard.
	envBinary = "LOCKGUARD_E2E_BINARY"
	// envReport is a file the suite writes its measurements to.
	envReport = "LOCKGUARD_E2E_REPORT"
)

// suite is what every test shares: one control plane and one lockguard
// deployment per run. Each test works in namespaces of its own.
type suite struct {
	mode string
	// cfg is an admin client configuration.
	cfg *rest.Config
	c   client.Client
	cs  kubernetes.Interface
	// kubeconfig is the admin kubeconfig file for kubectl; empty means
	// kubectl's own default ($KUBECONFIG).
	kubeconfig string
	// serverVersion is the API server's git version, e.g. v1.37.2.
	serverVersion string
	// namespace is lockguard's namespace (its Lease is there).
	namespace   string
	webhookName string
	// auditLog is the API server's audit log (deletes at level Metadata);
	// empty where the suite cannot read it (cluster mode).
	auditLog string
	lg       lockguard
}

// lockguard is the deployment under test: processes started by the suite
// (local mode) or a Deployment (cluster mode).
type lockguard interface {
	// Scale runs n replicas and returns once all of them are ready; 0 stops
	// every replica gracefully and returns once they are gone.
	Scale(ctx context.Context, n int) error
	// Replicas returns the running replicas.
	Replicas(ctx context.Context) ([]replica, error)
	// Check returns problems found in lockguard's logs after the run (for
	// example requests its RBAC does not allow), where it can see them.
	Check() []string
	// Describe says where to look when something fails.
	Describe() string
}

// replica is one running lockguard.
type replica interface {
	Name() string
	// IsLeader reports whether the replica holds the leader Lease.
	IsLeader(ctx context.Context) (bool, error)
	// Kill stops the replica without a graceful shutdown (it keeps the
	// Lease until it expires).
	Kill(ctx context.Context) error
	// Metrics scrapes the replica's metrics (every sample by its full
	// name); an error where the suite cannot reach them (cluster mode).
	Metrics(ctx context.Context) (map[string]float64, error)
	// Review sends an AdmissionReview to the replica's webhook directly,
	// over TLS, and returns the answer.
	Review(ctx context.Context, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error)
}

var s *suite

// kube is the harness's helper vocabulary for the suite's API server.
var kube *framework.Kube

// keepArtifacts is set when the run failed: local mode then keeps its logs.
var keepArtifacts bool

// measurements are timings the suite reports at the end.
var measurements struct {
	sync.Mutex
	lines []string
}

// report records a timing for the summary printed after the run.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	measurements.Lock()
	defer measurements.Unlock()
	measurements.lines = append(measurements.lines, t.Name()+": "+line)
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	start := time.Now()
	var (
		cleanup func()
		err     error
	)
	switch mode := os.Getenv(envMode); mode {
	case "", "local":
		s, cleanup, err = setupLocal()
	case "cluster":
		s, cleanup, err = setupCluster()
	default:
		err = fmt.Errorf("%s=%q: want local or cluster", envMode, mode)
	}
	if cleanup != nil {
		defer cleanup()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setup failed:", err)
		if s != nil && s.lg != nil {
			fmt.Fprintln(os.Stderr, "e2e:", s.lg.Describe())
		}
		keepArtifacts = true
		return 1
	}
	fmt.Printf("e2e: mode %s, Kubernetes %s, setup took %s\n", s.mode, s.serverVersion, time.Since(start).Round(time.Millisecond))

	code := m.Run()

	if problems := s.lg.Check(); len(problems) > 0 {
		fmt.Fprintln(os.Stderr, "e2e: FAIL: lockguard logged problems:")
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "  ", p)
		}
		code = 1
	}
	if code != 0 {
		fmt.Fprintln(os.Stderr, "e2e:", s.lg.Describe())
	}
	measurements.Lock()
	sort.Strings(measurements.lines)
	summary := fmt.Sprintf("e2e: measurements on Kubernetes %s (%s mode):\n  %s\ne2e: Kubernetes %s: suite took %s\n",
		s.serverVersion, s.mode, strings.Join(measurements.lines, "\n  "), s.serverVersion, time.Since(start).Round(time.Second))
	measurements.Unlock()
	fmt.Print(summary)
	// go test hides a passing package's output; make e2e prints this file.
	if path := os.Getenv(envReport); path != "" {
		if err := os.WriteFile(path, []byte(summary), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: writing the report:", err)
		}
	}
	keepArtifacts = code != 0
	return code
}

// newScheme returns the scheme of the suite's clients.
func newScheme() (*runtime.Scheme, error) {
	sch := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(sch); err != nil {
		return nil, err
	}
	if err := lockv1alpha1.AddToScheme(sch); err != nil {
		return nil, err
	}
	return sch, nil
}

// newSuite builds the clients of a suite for an admin configuration.
func newSuite(mode string, cfg *rest.Config) (*suite, error) {
	sch, err := newScheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: sch})
	if err != nil {
		return nil, fmt.Errorf("creating a client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return nil, fmt.Errorf("getting the server version: %w", err)
	}
	kube = framework.NewKube(c, "", "e2e-")
	kube.WebhookName = envOr(envWebhookName, framework.DefaultWebhookName)
	return &suite{
		mode:          mode,
		cfg:           cfg,
		c:             c,
		cs:            cs,
		serverVersion: v.GitVersion,
		webhookName:   kube.WebhookName,
	}, nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
