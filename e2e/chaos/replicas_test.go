//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/navique/lockguard/e2e/framework"
)

// replica is one lockguard Pod: a webhook port and a certificate volume
// of its own, and a supervisor that, like kubelet, restarts the process
// whenever it exits (killed, or stopped after losing its leader Lease),
// and probes its readiness for the load balancer.
type replica struct {
	name    string
	port    int
	certDir string
	logDir  string
	opts    framework.LockguardOptions

	mu      sync.Mutex
	cur     *framework.Lockguard
	logPath string
	starts  int

	ready atomic.Bool
	// restartDelay is how long the supervisor waits before restarting
	// the process after it exits (in nanoseconds).
	restartDelay atomic.Int64
}

// address is where the replica's webhook server listens.
func (r *replica) address() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// supervise runs the replica until ctx ends, then stops it gracefully.
func (r *replica) supervise(ctx context.Context, logf func(string, ...any)) {
	for {
		lg, err := r.start()
		if err != nil {
			logf("%s: start failed: %v", r.name, err)
		} else {
			r.probe(ctx, lg)
			if ctx.Err() != nil {
				_ = lg.Stop(30 * time.Second)
				r.ready.Store(false)
				return
			}
			r.ready.Store(false)
			logf("%s: exited", r.name)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(r.restartDelay.Load())):
		}
	}
}

// start starts a new lockguard process for the replica.
func (r *replica) start() (*framework.Lockguard, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	r.logPath = filepath.Join(r.logDir, fmt.Sprintf("%s-%02d.log", r.name, r.starts))
	logs, err := os.Create(r.logPath)
	if err != nil {
		return nil, err
	}
	o := r.opts
	o.Logs = logs
	o.Webhook = &framework.LocalWebhook{Host: "127.0.0.1", Port: r.port, CertDir: r.certDir}
	lg, err := framework.StartLockguard(o)
	if err != nil {
		logs.Close()
		return nil, err
	}
	go func() {
		<-lg.Exited()
		logs.Close()
	}()
	r.cur = lg
	return lg, nil
}

// probe polls /readyz every 200ms, like a readiness probe, until the
// process exits or ctx ends.
func (r *replica) probe(ctx context.Context, lg *framework.Lockguard) {
	hc := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-lg.Exited():
			return
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		resp, err := hc.Get("http://" + lg.ProbeAddr + "/readyz")
		ok := err == nil && resp.StatusCode == http.StatusOK
		if err == nil {
			resp.Body.Close()
		}
		r.ready.Store(ok)
	}
}

// kill SIGKILLs the running process; the supervisor restarts it after
// delay.
func (r *replica) kill(delay time.Duration) {
	r.restartDelay.Store(int64(delay))
	r.ready.Store(false)
	r.mu.Lock()
	lg := r.cur
	r.mu.Unlock()
	if lg != nil {
		lg.Kill()
	}
}

// isLeader reports whether the running process has acquired the leader
// Lease: a process that loses it exits, so its log says so only while it
// leads.
func (r *replica) isLeader() bool {
	r.mu.Lock()
	path, lg := r.logPath, r.cur
	r.mu.Unlock()
	if lg == nil {
		return false
	}
	select {
	case <-lg.Exited():
		return false
	default:
	}
	data, err := os.ReadFile(path)
	return err == nil && bytes.Contains(data, []byte("uccessfully acquired lease"))
}

// balancer is a TCP load balancer in front of the replicas, standing in
// for the webhook's Service and kube-proxy: each new connection goes to
// the next ready replica (round robin), and the TLS stream passes through
// untouched, so the API server talks TLS to lockguard itself. A replica
// leaves the rotation when its readiness probe fails or its process exits;
// connections already open to it break when it dies, as in a cluster.
type balancer struct {
	ln       net.Listener
	replicas []*replica
	next     atomic.Uint64
	refused  atomic.Int64 // connections closed because no replica was ready
	conns    atomic.Int64
}

func newBalancer(replicas []*replica) (*balancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return &balancer{ln: ln, replicas: replicas}, nil
}

func (b *balancer) port() int { return b.ln.Addr().(*net.TCPAddr).Port }

func (b *balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		go b.handle(c)
	}
}

func (b *balancer) handle(c net.Conn) {
	var ready []*replica
	for _, r := range b.replicas {
		if r.ready.Load() {
			ready = append(ready, r)
		}
	}
	if len(ready) == 0 {
		b.refused.Add(1)
		c.Close()
		return
	}
	r := ready[b.next.Add(1)%uint64(len(ready))]
	bc, err := net.DialTimeout("tcp", r.address(), time.Second)
	if err != nil {
		c.Close()
		return
	}
	b.conns.Add(1)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(bc, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, bc); done <- struct{}{} }()
	<-done
	c.Close()
	bc.Close()
	<-done
}

func (b *balancer) close() { b.ln.Close() }

// jitter returns a random duration in [lo, hi).
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
