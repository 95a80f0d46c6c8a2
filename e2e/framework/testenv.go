// Package framework starts a real Kubernetes control plane for lockguard's
// tests and demo: etcd and kube-apiserver (through controller-runtime's
// envtest) and, on request, kube-controller-manager with the garbage
// collector and namespace controllers. The binaries are built from the Go
// module proxy by hack/kube/build.sh (make kube) and cached under bin/k8s.
package framework

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// DefaultVersion is the Kubernetes version used when LOCKGUARD_KUBE_VERSION
// is not set.
const DefaultVersion = "1.37.2"

// Version returns the Kubernetes version to test against:
// $LOCKGUARD_KUBE_VERSION, or DefaultVersion.
func Version() string {
	if v := os.Getenv("LOCKGUARD_KUBE_VERSION"); v != "" {
		return strings.TrimPrefix(v, "v")
	}
	return DefaultVersion
}

// RepoRoot returns the root of the lockguard checkout that holds the
// current directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte("module github.com/navique/lockguard\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the lockguard repository")
		}
		dir = parent
	}
}

// AssetsDir returns where the control-plane binaries are cached:
// $LOCKGUARD_KUBE_ASSETS, or bin/k8s in the repository. It holds etcd and a
// v<version> directory per Kubernetes version.
func AssetsDir() (string, error) {
	if d := os.Getenv("LOCKGUARD_KUBE_ASSETS"); d != "" {
		return d, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "k8s"), nil
}

// Options say what to start.
type Options struct {
	// Version of Kubernetes; default Version().
	Version string
	// ControllerManager also starts kube-controller-manager with the garbage
	// collector, namespace and PVC protection controllers.
	ControllerManager bool
	// CRDDirs are directories of CRDs to install and wait for.
	CRDDirs []string
	// Logs receives the control plane's output; nil discards it.
	Logs io.Writer
	// APIServerFlags are extra kube-apiserver flags (name without the
	// dashes, value), e.g. feature gates a benchmark needs; default none.
	APIServerFlags map[string]string
	// EtcdFlags are extra etcd flags (name without the dashes, value), e.g.
	// a larger storage quota for a benchmark at scale; default none.
	EtcdFlags map[string]string
}

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Version is the Kubernetes version running.
	Version string
	// Dir is a scratch directory removed by Stop.
	Dir string

	env *envtest.Environment
	kcm *exec.Cmd

	// Restarts of kube-apiserver (restart.go).
	restartMu sync.Mutex
	apiArgs   []string
	apiPID    int
	apiProc   *apiServerProcess
}

// Start starts a control plane. Stop it with Stop.
func Start(o Options) (*Env, error) {
	if o.Version == "" {
		o.Version = Version()
	}
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(assets, "v"+o.Version)
	for _, p := range []string{filepath.Join(assets, "etcd"), filepath.Join(bin, "kube-apiserver")} {
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("control-plane binary %s is missing: run `make kube` (or `make kube KUBE_VERSION=%s`) first: %w", p, o.Version, err)
		}
	}
	dir, err := os.MkdirTemp("", "lockguard-kube-")
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:        o.CRDDirs,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(assets, "etcd"), Out: o.Logs, Err: o.Logs}
	for k, v := range o.EtcdFlags {
		env.ControlPlane.Etcd.Configure().Set(k, v)
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(bin, "kube-apiserver")
	api.Out, api.Err = o.Logs, o.Logs
	// On 127.0.0.1 the endpoint reconciler would publish an unusable
	// kubernetes Service endpoint; tests do not need it.
	api.Configure().Set("endpoint-reconciler-type", "none")
	for k, v := range o.APIServerFlags {
		api.Configure().Set(k, v)
	}

	cfg, err := env.Start()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting etcd and kube-apiserver v%s: %w", o.Version, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	e := &Env{Config: cfg, Version: o.Version, Dir: dir, env: env}
	if o.ControllerManager {
		if err := e.startControllerManager(filepath.Join(bin, "kube-controller-manager"), o.Logs); err != nil {
			_ = e.Stop()
			return nil, err
		}
	}
	return e, nil
}

// EtcdURL returns etcd's client URL (plain HTTP on loopback), for a
// benchmark that writes objects straight into etcd while kube-apiserver is
// down (RestartOptions.WhileDown).
func (e *Env) EtcdURL() string { return e.env.ControlPlane.Etcd.URL.String() }

// Stop stops every process and removes the scratch directory.
func (e *Env) Stop() error {
	var errs []error
	if e.kcm != nil && e.kcm.Process != nil {
		_ = e.kcm.Process.Kill()
		_ = e.kcm.Wait()
	}
	e.stopRestartedAPIServer()
	if err := e.env.Stop(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, os.RemoveAll(e.Dir))
	return errors.Join(errs...)
}

// UserConfig returns a client configuration that authenticates as user
// (with a client certificate) in groups. It has only what RBAC grants it.
func (e *Env) UserConfig(user string, groups ...string) (*rest.Config, error) {
	u, err := e.env.AddUser(envtest.User{Name: user, Groups: groups}, e.Config)
	if err != nil {
		return nil, fmt.Errorf("creating user %s: %w", user, err)
	}
	cfg := u.Config()
	cfg.QPS, cfg.Burst = e.Config.QPS, e.Config.Burst
	return cfg, nil
}

// WriteKubeconfig writes a kubeconfig file for cfg to path.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	data, err := kubeconfig(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// startControllerManager runs kube-controller-manager with the garbage
// collector, namespace and PVC protection controllers and waits until it
// is healthy.
func (e *Env) startControllerManager(path string, logs io.Writer) error {
	kc := filepath.Join(e.Dir, "controller-manager.kubeconfig")
	if err := WriteKubeconfig(e.Config, kc); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	cmd := exec.Command(path,
		"--kubeconfig="+kc,
		"--authentication-kubeconfig="+kc,
		"--authorization-kubeconfig="+kc,
		// pvc-protection removes the kubernetes.io/pvc-protection
		// finalizer that the API server's StorageObjectInUseProtection
		// admission puts on every PVC: without it a deleted PVC never
		// goes, nor does its namespace (it stays Terminating), which broke
		// later tests counting terminating namespaces.
		"--controllers=garbagecollector,namespace,pvc-protection",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+filepath.Join(e.Dir, "kcm-certs"),
		// Tests want cascades quickly.
		"--concurrent-gc-syncs=20",
		"--concurrent-namespace-syncs=10",
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-controller-manager: %w", err)
	}
	e.kcm = cmd
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // its own self-signed cert, loopback
	url := fmt.Sprintf("https://127.0.0.1:%d/healthz", port)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		select {
		case err := <-exited:
			e.kcm = nil
			return fmt.Errorf("kube-controller-manager exited: %v", err)
		case <-ctx.Done():
			return errors.New("kube-controller-manager did not become healthy within a minute")
		case <-time.After(200 * time.Millisecond):
		}
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
	}
}

// StartForTest starts a control plane for a test and stops it at cleanup.
// Without the binaries it skips the test, unless LOCKGUARD_REQUIRE_KUBE=1
// (set by `make test`), where it fails.
func StartForTest(t testing.TB, o Options) *Env {
	t.Helper()
	if o.Logs == nil && os.Getenv("LOCKGUARD_KUBE_LOGS") == "1" {
		o.Logs = os.Stderr
	}
	e, err := Start(o)
	if err != nil {
		if os.Getenv("LOCKGUARD_REQUIRE_KUBE") != "1" && strings.Contains(err.Error(), "is missing") {
			t.Skipf("no control plane: %v", err)
		}
		t.Fatalf("starting the control plane: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
	})
	return e
}

// StartForMain starts, for a suite's TestMain (after flag.Parse), a control
// plane with the CRDs of CRDDirs and logs per Logs. It returns instead a
// reason to skip the suite in -short mode, or when the binaries are missing
// and LOCKGUARD_REQUIRE_KUBE is not 1 (as StartForTest does).
func StartForMain(suite string) (env *Env, skip string, err error) {
	if testing.Short() {
		return nil, suite + " skipped in -short mode", nil
	}
	logs := Logs()
	root, err := RepoRoot()
	if err != nil {
		return nil, "", err
	}
	if env, err = Start(Options{CRDDirs: CRDDirs(root), Logs: logs}); err != nil {
		if os.Getenv("LOCKGUARD_REQUIRE_KUBE") != "1" && strings.Contains(err.Error(), "is missing") {
			return nil, "no control plane: " + err.Error(), nil
		}
		return nil, "", fmt.Errorf("starting the control plane: %w", err)
	}
	return env, "", nil
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago:
// the harness's one free-port helper.
func FreePort() (int, error) {
	for range 100 {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		handedOut.Lock()
		taken := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, errors.New("no free loopback port that this process has not handed out before")
}

// handedOut are the ports FreePort has returned in this process: the
// kernel may offer a port again once its probe is closed, before the
// process it was meant for has bound it (a replica's metrics server once
// took its own webhook port).
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CRDDirs returns the CRD directories most tests install: the Lock CRD
// (the chart's crds/, where controller-gen writes it) and the sample
// target kinds (e2e/testdata/crds) of the repository at root.
func CRDDirs(root string) []string {
	return []string{LockCRDDir(root), filepath.Join(root, "e2e", "testdata", "crds")}
}

// LockCRDDir returns the directory of the Lock CRD: the chart's crds/.
func LockCRDDir(root string) string {
	return filepath.Join(root, "deploy", "chart", "lockguard", "crds")
}
