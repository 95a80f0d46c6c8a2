package framework

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/navique/lockguard/cmd/lockguard/manager"
)

// The release the tests install (InstallChart) and the identity lockguard
// runs as: the ServiceAccount the chart binds its roles to.
const (
	ReleaseName             = "lockguard"
	ServiceAccountNamespace = "lockguard-system"
	ServiceAccountName      = "lockguard"
	// WebhookConfigurationName is the name of the chart's
	// ValidatingWebhookConfiguration in the release ReleaseName.
	WebhookConfigurationName = ReleaseName
)

// ServiceAccountUser is the user name of lockguard's ServiceAccount, as
// the API server (and RBAC denials in lockguard's log) names it.
const ServiceAccountUser = "system:serviceaccount:" + ServiceAccountNamespace + ":" + ServiceAccountName

// ServiceAccountConfig returns a client configuration that authenticates as
// lockguard's ServiceAccount (with the groups the API server gives a
// ServiceAccount), so it has exactly the RBAC that the chart grants.
func (e *Env) ServiceAccountConfig() (*rest.Config, error) {
	return e.UserConfig(ServiceAccountUser,
		"system:serviceaccounts", "system:serviceaccounts:"+ServiceAccountNamespace, "system:authenticated")
}

// Lockguard is a lockguard binary running as a separate process: the one
// launcher of the binary for the demo, the e2e, hostile, chaos and bench
// runs.
type Lockguard struct {
	// Webhook is where it serves the webhook.
	Webhook *LocalWebhook
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	// MetricsAddr serves /metrics over plain HTTP; empty when
	// LockguardOptions.Metrics is false.
	MetricsAddr string
	// Started is when the process started.
	Started time.Time

	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// LockguardOptions say how to run the binary.
type LockguardOptions struct {
	// Binary is the path of the lockguard binary.
	Binary string
	// Kubeconfig is the kubeconfig file it uses.
	Kubeconfig string
	// Webhook is where it serves; nil picks a new port and certificate.
	Webhook *LocalWebhook
	// Dir is where a new webhook certificate goes.
	Dir string
	// Metrics serves the metrics on a free loopback port over plain HTTP
	// (--metrics-secure=false), for IsLeader and Metrics; default off.
	Metrics bool
	// Args are extra flags; they override the defaults.
	Args []string
	// Logs receives its output; nil discards it.
	Logs io.Writer
	// Env are extra environment variables ("NAME=value"), after the
	// caller's own (GOMEMLIMIT, as the chart sets it).
	Env []string
}

// StartLockguard starts the binary (leader election on, in
// lockguard-system) and returns when it is running; call WaitReady to wait
// until it is ready.
func StartLockguard(o LockguardOptions) (*Lockguard, error) {
	wh := o.Webhook
	if wh == nil {
		var err error
		if wh, err = NewLocalWebhook(o.Dir); err != nil {
			return nil, err
		}
	}
	probePort, err := FreePort()
	if err != nil {
		return nil, err
	}
	l := &Lockguard{Webhook: wh, ProbeAddr: "127.0.0.1:" + strconv.Itoa(probePort), exited: make(chan struct{})}
	metrics := []string{"--metrics-bind-address=0"}
	if o.Metrics {
		port, err := FreePort()
		if err != nil {
			return nil, err
		}
		l.MetricsAddr = "127.0.0.1:" + strconv.Itoa(port)
		// Plain HTTP on loopback, so that the harness reads it without a
		// ServiceAccount token.
		metrics = []string{"--metrics-bind-address=" + l.MetricsAddr, "--metrics-secure=false"}
	}
	// One process serves the webhook unless told of others: the peer
	// protocol's standalone mode (--peers empty), as the chart's
	// --peer-service with one replica.
	peerArgs := []string{"--peers="}
	for _, a := range o.Args {
		if strings.HasPrefix(a, "--peers") || strings.HasPrefix(a, "--peer-service") {
			peerArgs = nil
		}
	}
	// The webhook configuration InstallChart installs calls this process
	// (with the peer protocol, a replica is warm only while its Lock-create
	// entry does); a ReplicaSet's Args name its front instead.
	entryArgs := []string{"--webhook-configuration=" + WebhookConfigurationName, "--webhook-url=https://" + wh.Address()}
	args := append([]string{
		"--kubeconfig=" + o.Kubeconfig,
		"--webhook-host=" + wh.Host,
		"--webhook-port=" + strconv.Itoa(wh.Port),
		"--cert-dir=" + wh.CertDir,
		"--health-probe-bind-address=" + l.ProbeAddr,
		"--leader-elect=true",
		"--leader-election-namespace=" + ServiceAccountNamespace,
	}, slices.Concat(metrics, peerArgs, entryArgs, o.Args)...)
	l.cmd = exec.Command(filepath.Clean(o.Binary), args...)
	l.cmd.Stdout, l.cmd.Stderr = o.Logs, o.Logs
	if len(o.Env) > 0 {
		l.cmd.Env = append(os.Environ(), o.Env...)
	}
	// Its own process group: a Ctrl-C at the terminal (make demo) reaches
	// only the parent, which stops lockguard with one SIGTERM. A second
	// signal would make lockguard exit at once with status 1.
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	l.Started = time.Now()
	if err := l.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.Binary, err)
	}
	go func() {
		l.err = l.cmd.Wait()
		close(l.exited)
	}()
	return l, nil
}

// Exited is closed when the lockguard process has exited.
func (l *Lockguard) Exited() <-chan struct{} { return l.exited }

// Pid returns the process id.
func (l *Lockguard) Pid() int { return l.cmd.Process.Pid }

// probeClient is the client of the readiness probes.
var probeClient = &http.Client{Timeout: time.Second}

// Ready probes /readyz once, as kubelet's readiness probe does.
func (l *Lockguard) Ready() bool {
	resp, err := probeClient.Get("http://" + l.ProbeAddr + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// WaitReady waits until /readyz answers 200, the process exits, or ctx ends.
func (l *Lockguard) WaitReady(ctx context.Context) error {
	for !l.Ready() {
		select {
		case <-l.exited:
			return fmt.Errorf("lockguard exited before it was ready: %v", l.err)
		case <-ctx.Done():
			return fmt.Errorf("lockguard not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after timeout).
func (l *Lockguard) Stop(timeout time.Duration) error {
	select {
	case <-l.exited:
		return nil
	default:
	}
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
		var ee *exec.ExitError
		if errors.As(l.err, &ee) {
			return fmt.Errorf("lockguard exited with %v", l.err)
		}
		return nil
	case <-time.After(timeout):
		_ = l.cmd.Process.Kill()
		<-l.exited
		return fmt.Errorf("lockguard did not stop within %s; killed", timeout)
	}
}

// Kill sends SIGKILL and waits for the process to end: no graceful
// shutdown, the leader Lease is not released.
func (l *Lockguard) Kill() {
	_ = l.cmd.Process.Kill()
	<-l.exited
}

// Metrics scrapes the metrics endpoint (LockguardOptions.Metrics) and
// returns the value of every sample by its full name, labels included.
func (l *Lockguard) Metrics(ctx context.Context) (map[string]float64, error) {
	if l.MetricsAddr == "" {
		return nil, errors.New("lockguard runs without metrics (LockguardOptions.Metrics)")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+l.MetricsAddr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("metrics: HTTP %d: %s", resp.StatusCode, b)
	}
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 64<<10), 1<<20)
	for s.Scan() {
		line := s.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out, s.Err()
}

// IsLeader reports whether the process holds the leader Lease, from
// controller-runtime's leader_election_master_status metric: the one way
// the harness tells the leader of local replicas (they share a hostname,
// so the Lease holder alone does not say which one leads).
func (l *Lockguard) IsLeader(ctx context.Context) (bool, error) {
	select {
	case <-l.exited:
		return false, nil
	default:
	}
	m, err := l.Metrics(ctx)
	if err != nil {
		return false, err
	}
	return m[`leader_election_master_status{name="`+manager.LeaderElectionID+`"}`] == 1, nil
}
