//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/manager"
	"github.com/navique/lockguard/webhook"
)

// serviceAccount is lockguard's identity, as deploy/rbac names it.
const (
	lockguardNamespace = "lockguard-system"
	serviceAccountUser = "system:serviceaccount:" + lockguardNamespace + ":lockguard"
)

// serviceAccountGroups are the groups the API server gives that
// ServiceAccount's tokens.
var serviceAccountGroups = []string{"system:serviceaccounts", "system:serviceaccounts:" + lockguardNamespace, "system:authenticated"}

// setupLocal starts a control plane with the garbage collector and
// namespace controllers, installs lockguard's CRD, RBAC and webhook
// configuration from deploy/, and runs one replica of bin/lockguard as
// lockguard's ServiceAccount.
func setupLocal() (*suite, func(), error) {
	root, err := framework.RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	binary := envOr(envBinary, filepath.Join(root, "bin", "lockguard"))
	if _, err := os.Stat(binary); err != nil {
		return nil, nil, fmt.Errorf("the lockguard binary is missing: run `make build` first: %w", err)
	}
	work, err := os.MkdirTemp("", "lockguard-e2e-")
	if err != nil {
		return nil, nil, err
	}
	var closers []func()
	cleanup := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
		if keepArtifacts {
			fmt.Fprintln(os.Stderr, "e2e: logs of the control plane and of every lockguard process are kept in", work)
		} else {
			os.RemoveAll(work)
		}
	}
	logs, err := os.Create(filepath.Join(work, "control-plane.log"))
	if err != nil {
		return nil, cleanup, err
	}
	closers = append(closers, func() { logs.Close() })

	env, err := framework.Start(framework.Options{
		ControllerManager: true,
		CRDDirs:           framework.CRDDirs(root),
		Logs:              logs,
	})
	if err != nil {
		return nil, cleanup, err
	}
	closers = append(closers, func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the control plane:", err)
		}
	})

	st, err := newSuite("local", env.Config)
	if err != nil {
		return nil, cleanup, err
	}
	st.namespace = lockguardNamespace
	st.kubeconfig = filepath.Join(work, "admin.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, st.kubeconfig); err != nil {
		return nil, cleanup, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// lockguard runs as its ServiceAccount: only what the chart grants.
	saConfig, err := env.UserConfig(serviceAccountUser, serviceAccountGroups...)
	if err != nil {
		return nil, cleanup, err
	}
	saKubeconfig := filepath.Join(work, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saConfig, saKubeconfig); err != nil {
		return nil, cleanup, err
	}

	// The chart's RBAC and webhook configuration, pointing at a local
	// address, where a TCP proxy stands for the Service in front of the
	// replicas.
	lw, err := framework.NewLocalWebhook(work)
	if err != nil {
		return nil, cleanup, err
	}
	svc, err := newProxy(lw.Address())
	if err != nil {
		return nil, cleanup, err
	}
	closers = append(closers, svc.Close)
	vwc, err := lw.InstallChart(ctx, st.c)
	if err != nil {
		return nil, cleanup, err
	}
	if len(vwc.Webhooks) != 1 || vwc.Webhooks[0].Name != st.webhookName {
		return nil, cleanup, fmt.Errorf("the chart's webhook configuration: want one webhook named %s", st.webhookName)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(lw.CA) {
		return nil, cleanup, errors.New("cannot parse the webhook CA")
	}
	lg := &localLockguard{
		binary:     binary,
		kubeconfig: saKubeconfig,
		certDir:    lw.CertDir,
		ca:         pool,
		dir:        work,
		svc:        svc,
	}
	st.lg = lg
	s = st
	closers = append(closers, func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := lg.Scale(ctx, 0); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping lockguard:", err)
		}
	})
	if err := lg.Scale(ctx, 1); err != nil {
		return st, cleanup, err
	}
	return st, cleanup, nil
}

// localLockguard runs bin/lockguard processes on this machine, all behind
// one webhook address (the proxy), like the pods of a Deployment behind a
// Service.
type localLockguard struct {
	binary, kubeconfig, certDir, dir string
	ca                               *x509.CertPool
	svc                              *proxy

	mu      sync.Mutex
	procs   []*process
	started int
	gone    []*process // stopped or killed, for their logs
}

// Describe says where the logs are.
func (l *localLockguard) Describe() string {
	return fmt.Sprintf("lockguard runs as %s; logs of the control plane and of every lockguard process are in %s", serviceAccountUser, l.dir)
}

// Scale starts or gracefully stops processes until n run and are ready.
func (l *localLockguard) Scale(ctx context.Context, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.procs) > n {
		p := l.procs[len(l.procs)-1]
		l.procs = l.procs[:len(l.procs)-1]
		l.svc.SetBackends(l.backends())
		if err := p.stop(ctx, syscall.SIGTERM); err != nil {
			return err
		}
		l.gone = append(l.gone, p)
	}
	for len(l.procs) < n {
		p, err := l.start(ctx)
		if err != nil {
			return err
		}
		l.procs = append(l.procs, p)
		l.svc.SetBackends(l.backends())
	}
	return nil
}

func (l *localLockguard) backends() []string {
	addrs := make([]string, 0, len(l.procs))
	for _, p := range l.procs {
		addrs = append(addrs, p.webhookAddr)
	}
	return addrs
}

// Replicas returns the running processes.
func (l *localLockguard) Replicas(context.Context) ([]replica, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]replica, 0, len(l.procs))
	for _, p := range l.procs {
		out = append(out, p)
	}
	return out, nil
}

// Check scans every process's log for requests that RBAC denied to
// lockguard's ServiceAccount.
func (l *localLockguard) Check() []string {
	l.mu.Lock()
	all := append(slices.Clone(l.gone), l.procs...)
	l.mu.Unlock()
	var problems []string
	for _, p := range all {
		f, err := os.Open(p.logPath)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, `User \"`+serviceAccountUser+`\" cannot`) || strings.Contains(line, `User "`+serviceAccountUser+`" cannot`) {
				problems = append(problems, p.name+": "+line)
			}
		}
		f.Close()
	}
	return problems
}

// start runs one more lockguard process and waits until it is ready.
func (l *localLockguard) start(ctx context.Context) (*process, error) {
	l.started++
	name := fmt.Sprintf("lockguard-%d", l.started)
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	p := &process{
		name:        name,
		webhookAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		probeAddr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])),
		metricsAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2])),
		logPath:     filepath.Join(l.dir, name+".log"),
		ca:          l.ca,
		owner:       l,
		exited:      make(chan struct{}),
	}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(l.binary,
		"--kubeconfig="+l.kubeconfig,
		"--webhook-host=127.0.0.1",
		"--webhook-port="+strconv.Itoa(ports[0]),
		"--cert-dir="+l.certDir,
		"--health-probe-bind-address="+p.probeAddr,
		"--metrics-bind-address="+p.metricsAddr,
		// Plain HTTP on loopback, so that the suite can read
		// leader_election_master_status without a ServiceAccount token.
		"--metrics-secure=false",
		"--leader-elect=true",
		"--leader-election-namespace="+lockguardNamespace,
	)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	if err := p.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", l.binary, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	if err := p.waitReady(ctx); err != nil {
		_ = p.stop(context.Background(), syscall.SIGKILL)
		l.gone = append(l.gone, p)
		return nil, err
	}
	return p, nil
}

// process is one lockguard process.
type process struct {
	name                                string
	webhookAddr, probeAddr, metricsAddr string
	logPath                             string
	ca                                  *x509.CertPool
	owner                               *localLockguard
	cmd                                 *exec.Cmd
	exited                              chan struct{}
	err                                 error
}

// Name returns the process's name (also the name of its log file).
func (p *process) Name() string { return p.name }

// waitReady polls /readyz until it answers 200.
func (p *process) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	url := "http://" + p.probeAddr + "/readyz"
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited before it was ready (%v); its log:\n%s", p.name, p.err, tail(p.logPath, 30))
		case <-ctx.Done():
			return fmt.Errorf("%s was not ready in time; its log:\n%s", p.name, tail(p.logPath, 30))
		case <-time.After(100 * time.Millisecond):
		}
		resp, err := hc.Get(url)
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
	}
}

// stop sends sig and waits until the process has exited.
func (p *process) stop(ctx context.Context, sig syscall.Signal) error {
	_ = p.cmd.Process.Signal(sig)
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	select {
	case <-p.exited:
		return nil
	case <-ctx.Done():
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop on %v in time", p.name, sig)
	}
}

// Kill kills the process (SIGKILL): no graceful shutdown, the Lease is
// not released.
func (p *process) Kill(ctx context.Context) error {
	l := p.owner
	l.mu.Lock()
	defer l.mu.Unlock()
	i := slices.Index(l.procs, p)
	if i < 0 {
		return fmt.Errorf("%s is not running", p.name)
	}
	l.procs = slices.Delete(l.procs, i, i+1)
	l.svc.SetBackends(l.backends())
	l.gone = append(l.gone, p)
	return p.stop(ctx, syscall.SIGKILL)
}

// IsLeader reads leader_election_master_status from the process's metrics.
func (p *process) IsLeader(ctx context.Context) (bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.metricsAddr+"/metrics", nil)
	if err != nil {
		return false, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	want := `leader_election_master_status{name="` + manager.LeaderElectionID + `"} 1`
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == want {
			return true, nil
		}
	}
	return false, nil
}

// Review posts an AdmissionReview to the process's webhook server over
// TLS, verifying its serving certificate.
func (p *process) Review(ctx context.Context, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: p.ca, MinVersion: tls.VersionTLS12}}}
	return postReview(ctx, hc, "https://"+p.webhookAddr+webhook.Path, review)
}

// postReview sends review to url and decodes the answer.
func postReview(ctx context.Context, hc *http.Client, url string, review *admissionv1.AdmissionReview) (*admissionv1.AdmissionReview, error) {
	body, err := json.Marshal(review)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST %s: %s: %s", url, resp.Status, data)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("decoding the AdmissionReview from %s: %w", url, err)
	}
	return &out, nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freePorts returns n distinct free TCP ports on 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// proxy forwards TCP connections (TLS passes through) to one of its
// backends, round robin, skipping backends that refuse the connection: a
// stand-in for a Service in front of lockguard's pods. With no backend, it
// closes connections at once, so the API server's webhook call fails.
type proxy struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
}

// newProxy listens on addr.
func newProxy(addr string) (*proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s for the webhook proxy: %w", addr, err)
	}
	p := &proxy{ln: ln}
	go p.serve()
	return p, nil
}

// SetBackends replaces the backends.
func (p *proxy) SetBackends(addrs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backends = slices.Clone(addrs)
}

// Close stops listening.
func (p *proxy) Close() { p.ln.Close() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) handle(c net.Conn) {
	defer c.Close()
	p.mu.Lock()
	order := make([]string, 0, len(p.backends))
	for i := range p.backends {
		order = append(order, p.backends[(p.next+i)%len(p.backends)])
	}
	p.next++
	p.mu.Unlock()
	for _, addr := range order {
		b, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		defer b.Close()
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
		<-done
		return
	}
}
