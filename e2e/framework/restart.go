package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
)

// RestartOptions say how RestartAPIServer restarts kube-apiserver.
type RestartOptions struct {
	// Kill stops it with SIGKILL instead of a graceful SIGTERM.
	Kill bool
	// Down is how long it stays down before it starts again. Default 0.
	Down time.Duration
	// GracePeriod is how long a SIGTERMed kube-apiserver may take to exit
	// before it gets SIGKILL, as kubelet's terminationGracePeriodSeconds.
	// It matters: kube-apiserver stops listening at once, but waits up to
	// its request timeout (60s) for open watches to end. Default 30s.
	GracePeriod time.Duration
	// WhileDown, if set, runs after kube-apiserver has stopped (and after
	// Down) and before it starts again: a benchmark writes objects
	// straight into etcd there (Env.EtcdURL). Its error is returned, with
	// kube-apiserver started again all the same.
	WhileDown func(context.Context) error
}

// apiServerProcess is the kube-apiserver that RestartAPIServer started, if
// any: Stop ends it before envtest stops etcd.
type apiServerProcess struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// RestartAPIServer stops kube-apiserver and starts it again on the same
// port, with the same flags, certificates and etcd, so that every client
// configuration of the Env stays valid; clients see connection errors
// while it is down, as during a control-plane upgrade. It returns once the
// new process is ready (/readyz), or an error when it does not become
// ready within ctx.
//
// envtest cannot restart its API server in place (its Stop removes the
// certificates), so the first restart finds envtest's process among this
// process's children (Linux /proc), stops it by its process id and starts
// the binary again with the command line read from /proc; Stop ends the
// restarted process.
func (e *Env) RestartAPIServer(ctx context.Context, o RestartOptions) error {
	e.restartMu.Lock()
	defer e.restartMu.Unlock()
	api := e.env.ControlPlane.APIServer
	if e.apiArgs == nil {
		pid, args, err := findChild(api.Path)
		if err != nil {
			return fmt.Errorf("finding envtest's kube-apiserver: %w", err)
		}
		e.apiArgs, e.apiPID = args, pid
	}
	sig := syscall.SIGTERM
	if o.Kill {
		sig = syscall.SIGKILL
	}
	grace := o.GracePeriod
	if grace <= 0 {
		grace = 30 * time.Second
	}
	if e.apiProc != nil {
		_ = e.apiProc.cmd.Process.Signal(sig)
		select {
		case <-e.apiProc.exited:
		case <-time.After(grace):
			_ = e.apiProc.cmd.Process.Kill()
			<-e.apiProc.exited
		}
		e.apiProc = nil
	} else if e.apiPID != 0 {
		// envtest's process: envtest reaps it; wait until it is gone.
		if err := stopPID(e.apiPID, sig, grace); err != nil {
			return err
		}
		e.apiPID = 0
	}
	select {
	case <-time.After(o.Down):
	case <-ctx.Done():
		return ctx.Err()
	}

	var downErr error
	if o.WhileDown != nil {
		downErr = o.WhileDown(ctx)
	}
	cmd := exec.Command(api.Path, e.apiArgs...)
	cmd.Stdout, cmd.Stderr = api.Out, api.Err
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	p := &apiServerProcess{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	e.apiProc = p
	return errors.Join(downErr, e.waitAPIServerReady(ctx, p))
}

// waitAPIServerReady polls /readyz as the admin until it answers 200.
func (e *Env) waitAPIServerReady(ctx context.Context, p *apiServerProcess) error {
	cfg := rest.CopyConfig(e.Config)
	cfg.Timeout = 2 * time.Second
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/readyz"
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return errors.New("kube-apiserver exited after the restart")
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready after the restart: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stopRestartedAPIServer ends the kube-apiserver RestartAPIServer started.
func (e *Env) stopRestartedAPIServer() {
	e.restartMu.Lock()
	defer e.restartMu.Unlock()
	if e.apiProc == nil {
		return
	}
	_ = e.apiProc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-e.apiProc.exited:
	case <-time.After(30 * time.Second):
		_ = e.apiProc.cmd.Process.Kill()
		<-e.apiProc.exited
	}
	e.apiProc = nil
}

// findChild returns the process id and arguments of the child of this
// process that runs the executable at path.
func findChild(path string) (int, []string, error) {
	want, err := filepath.EvalSymlinks(path)
	if err != nil {
		return 0, nil, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	self := os.Getpid()
	for _, ent := range entries {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if ppid, err := parentPID(pid); err != nil || ppid != self {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || exe != want {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			return 0, nil, err
		}
		args := strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		return pid, args[1:], nil
	}
	return 0, nil, fmt.Errorf("no child process runs %s", want)
}

// parentPID reads the parent process id from /proc/<pid>/stat.
func parentPID(pid int) (int, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 {
		return 0, errors.New("malformed stat")
	}
	return strconv.Atoi(fields[1])
}

// stopPID signals pid and waits until it has exited (and been reaped by
// its parent, here envtest), grace at most before SIGKILL.
func stopPID(pid int, sig syscall.Signal, grace time.Duration) error {
	if err := syscall.Kill(pid, sig); err != nil {
		return fmt.Errorf("signalling kube-apiserver (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(grace)
	for {
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return nil
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Minute)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
