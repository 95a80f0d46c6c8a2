package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// ServiceAccount is the identity lockguard runs as: the ServiceAccount
// deploy/rbac binds its roles to.
const (
	ServiceAccountNamespace = "lockguard-system"
	ServiceAccountName      = "lockguard"
)

// ServiceAccountConfig returns a client configuration that authenticates as
// lockguard's ServiceAccount (with the groups the API server gives a
// ServiceAccount), so it has exactly the RBAC that deploy/ grants.
func (e *Env) ServiceAccountConfig() (*rest.Config, error) {
	return e.UserConfig("system:serviceaccount:"+ServiceAccountNamespace+":"+ServiceAccountName,
		"system:serviceaccounts", "system:serviceaccounts:"+ServiceAccountNamespace, "system:authenticated")
}

// Lockguard is a lockguard binary running as a separate process.
type Lockguard struct {
	// Webhook is where it serves the webhook.
	Webhook *LocalWebhook
	// ProbeAddr serves /healthz and /readyz.
	ProbeAddr string
	cmd       *exec.Cmd
	exited    chan struct{}
	err       error
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
	// Args are extra flags.
	Args []string
	// Logs receives its output; nil discards it.
	Logs io.Writer
}

// StartLockguard starts the binary (leader election on, in
// lockguard-system; metrics off unless Args say otherwise) and returns when
// it is running; call WaitReady to wait until it is ready.
func StartLockguard(o LockguardOptions) (*Lockguard, error) {
	wh := o.Webhook
	if wh == nil {
		var err error
		if wh, err = NewLocalWebhook(o.Dir); err != nil {
			return nil, err
		}
	}
	probePort, err := freePort()
	if err != nil {
		return nil, err
	}
	l := &Lockguard{Webhook: wh, ProbeAddr: "127.0.0.1:" + strconv.Itoa(probePort), exited: make(chan struct{})}
	args := append([]string{
		"--kubeconfig=" + o.Kubeconfig,
		"--webhook-host=" + wh.Host,
		"--webhook-port=" + strconv.Itoa(wh.Port),
		"--cert-dir=" + wh.CertDir,
		"--health-probe-bind-address=" + l.ProbeAddr,
		"--metrics-bind-address=0",
		"--leader-elect=true",
		"--leader-election-namespace=" + ServiceAccountNamespace,
	}, o.Args...)
	l.cmd = exec.Command(filepath.Clean(o.Binary), args...)
	l.cmd.Stdout, l.cmd.Stderr = o.Logs, o.Logs
	// Its own process group: a Ctrl-C at the terminal (make demo) reaches
	// only the parent, which stops lockguard with one SIGTERM. A second
	// signal would make lockguard exit at once with status 1.
	l.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := l.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", o.Binary, err)
	}
	go func() {
		l.err = l.cmd.Wait()
		close(l.exited)
	}()
	return l, nil
}

// WaitReady waits until /readyz answers 200, the process exits, or ctx ends.
func (l *Lockguard) WaitReady(ctx context.Context) error {
	client := &http.Client{Timeout: time.Second}
	for {
		resp, err := client.Get("http://" + l.ProbeAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-l.exited:
			return fmt.Errorf("lockguard exited before it was ready: %v", l.err)
		case <-ctx.Done():
			return fmt.Errorf("lockguard not ready: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
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

// Kill sends SIGKILL and waits for the process to end.
func (l *Lockguard) Kill() {
	_ = l.cmd.Process.Kill()
	<-l.exited
}
