package framework

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Front stands in for the webhook's Service and kube-proxy in front of
// local lockguard replicas: each new TCP connection goes to the next
// backend, round robin, skipping backends that refuse it, and the TLS
// stream passes through untouched, so the API server talks TLS to
// lockguard itself. With no backend it closes the connection at once, so
// the API server's webhook call fails as it does with no endpoints.
type Front struct {
	ln net.Listener

	mu       sync.Mutex
	backends []string
	next     int
	// pinned, when set, takes every connection (Pin).
	pinned string
	// open are the connections being forwarded.
	open map[net.Conn]struct{}

	// Conns counts the connections forwarded; Refused those closed because
	// no backend took them.
	Conns, Refused atomic.Int64
}

// NewFront listens on addr (host:port; port 0 picks one).
func NewFront(addr string) (*Front, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s for the webhook front: %w", addr, err)
	}
	f := &Front{ln: ln}
	go f.serve()
	return f, nil
}

// Port returns the port the front listens on.
func (f *Front) Port() int { return f.ln.Addr().(*net.TCPAddr).Port }

// SetBackends replaces the backends (host:port).
func (f *Front) SetBackends(addrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.backends = slices.Clone(addrs)
}

// Pin closes the connections being forwarded and sends every new one to
// addr alone, whatever the backends, until the returned function is
// called: for a test that must know which replica the API server's calls
// through the front reach (it reconnects, through the pin).
func (f *Front) Pin(addr string) (unpin func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pinned = addr
	for c := range f.open {
		c.Close()
	}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.pinned = ""
	}
}

// Close stops listening.
func (f *Front) Close() { f.ln.Close() }

func (f *Front) serve() {
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		go f.handle(c)
	}
}

func (f *Front) handle(c net.Conn) {
	defer func() {
		c.Close()
		f.mu.Lock()
		delete(f.open, c)
		f.mu.Unlock()
	}()
	f.mu.Lock()
	order := make([]string, 0, len(f.backends))
	for i := range f.backends {
		order = append(order, f.backends[(f.next+i)%len(f.backends)])
	}
	if f.pinned != "" {
		order = []string{f.pinned}
	}
	if f.open == nil {
		f.open = map[net.Conn]struct{}{}
	}
	f.open[c] = struct{}{}
	f.next++
	f.mu.Unlock()
	for _, addr := range order {
		b, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			continue
		}
		f.Conns.Add(1)
		done := make(chan struct{}, 2)
		go func() { _, _ = io.Copy(b, c); done <- struct{}{} }()
		go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
		<-done
		c.Close()
		b.Close()
		<-done
		return
	}
	f.Refused.Add(1)
}

// ReplicaOptions say how a ReplicaSet runs lockguard.
type ReplicaOptions struct {
	// Binary and Kubeconfig are those of LockguardOptions.
	Binary, Kubeconfig string
	// Args are extra flags for every process.
	Args []string
	// Dir holds each process's log (<replica>-<start>.log).
	Dir string
	// CertDir returns the certificate directory of the i-th replica
	// (from 0), which keeps it across restarts; it must hold a certificate
	// the front's CA verifies. Default: the front webhook's CertDir.
	CertDir func(i int) string
	// Restart restarts a replica whose process exits (killed, or stopped
	// after losing its leader Lease), after its restart delay, as kubelet
	// restarts a container; default off: the replica stays down.
	Restart bool
	// PendingTTL is each process's --pending-ttl (how long a new replica
	// stays cold, internal/peers); default 15s, so that short runs see
	// warm replicas (the product's default is 2m).
	PendingTTL time.Duration
	// IdentityLease is each process's --peer-identity-lease (how long a
	// replica that stopped renewing its identity Lease counts, and stops
	// Lock creates); default 6s (the product's default is 30s).
	IdentityLease time.Duration
}

// ReplicaSet runs lockguard processes behind one Front, like the pods of
// a Deployment behind a Service: each replica has its own webhook port,
// probe and metrics ports, and is in the front's rotation while its
// readiness probe (every 200ms) passes.
type ReplicaSet struct {
	// Front is where the webhook configuration points.
	Front *Front
	// Webhook is the front's address and the CA of the replicas'
	// certificates: what InstallChart points the webhook configuration at.
	Webhook *LocalWebhook

	o ReplicaOptions
	// group is the set's --peer-service: its replicas' identity Leases
	// carry it (peers.LeaseGroupLabel), as the chart's carry the webhook
	// Service's name.
	group   string
	scaling sync.Mutex // one Scale at a time
	mu      sync.Mutex // guards the lists
	running []*Replica
	gone    []*Replica // scaled down or deleted, for their logs
	created int
}

// NewReplicaSet starts a front on a free port for replicas serving the
// certificate of w (its CertDir and CA); none runs until Scale.
func NewReplicaSet(w *LocalWebhook, o ReplicaOptions) (*ReplicaSet, error) {
	f, err := NewFront("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	if o.CertDir == nil {
		o.CertDir = func(int) string { return w.CertDir }
	}
	if o.PendingTTL == 0 {
		o.PendingTTL = 15 * time.Second
	}
	if o.IdentityLease == 0 {
		o.IdentityLease = 6 * time.Second
	}
	group := fmt.Sprintf("lockguard-set-%d-%d", os.Getpid(), setCount.Add(1))
	return &ReplicaSet{Front: f, Webhook: &LocalWebhook{Host: "127.0.0.1", Port: f.Port(), CertDir: w.CertDir, CA: w.CA}, o: o, group: group}, nil
}

// setCount numbers the ReplicaSets of a process.
var setCount atomic.Int64

// LeaseGroup is the value of peers.LeaseGroupLabel on the identity Leases
// of the set's replicas (in ServiceAccountNamespace).
func (rs *ReplicaSet) LeaseGroup() string { return rs.group }

// IdentityLease is the replicas' --peer-identity-lease.
func (rs *ReplicaSet) IdentityLease() time.Duration { return rs.o.IdentityLease }

// PendingTTL returns the replicas' --pending-ttl.
func (rs *ReplicaSet) PendingTTL() time.Duration { return rs.o.PendingTTL }

// Scale starts or gracefully stops (SIGTERM) replicas until n run, and
// returns once each new one is ready.
func (rs *ReplicaSet) Scale(ctx context.Context, n int) error {
	rs.scaling.Lock()
	defer rs.scaling.Unlock()
	for {
		rs.mu.Lock()
		count := len(rs.running)
		var last *Replica
		if count > n {
			last = rs.running[count-1]
			rs.running = rs.running[:count-1]
			rs.gone = append(rs.gone, last)
		}
		rs.mu.Unlock()
		switch {
		case count > n:
			last.shutdown() // it deletes its identity Lease on the way out
		case count < n:
			if err := rs.newReplica(ctx); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// Replicas returns the replicas that run (those scaled down or deleted
// are not among them).
func (rs *ReplicaSet) Replicas() []*Replica {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return slices.Clone(rs.running)
}

// Stop stops every replica gracefully and closes the front.
func (rs *ReplicaSet) Stop() error {
	err := rs.Scale(context.Background(), 0)
	rs.Front.Close()
	return err
}

// RBACDenials scans every log of every replica for requests that RBAC
// denied to lockguard's ServiceAccount, so a permission missing from the
// chart shows up even where no assertion looks.
func (rs *ReplicaSet) RBACDenials() []string {
	rs.mu.Lock()
	all := slices.Concat(rs.gone, rs.running)
	rs.mu.Unlock()
	var problems []string
	for _, r := range all {
		for _, path := range r.logPaths() {
			f, err := os.Open(path)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if line := sc.Text(); strings.Contains(line, `User \"`+ServiceAccountUser+`\" cannot`) || strings.Contains(line, `User "`+ServiceAccountUser+`" cannot`) {
					problems = append(problems, filepath.Base(path)+": "+line)
				}
			}
			f.Close()
		}
	}
	return problems
}

// updateFront puts the ready replicas in the front's rotation.
func (rs *ReplicaSet) updateFront() {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var addrs []string
	for _, r := range rs.running {
		if r.ready.Load() {
			addrs = append(addrs, r.Address())
		}
	}
	rs.Front.SetBackends(addrs)
}

// newReplica adds a replica and waits until it is ready.
func (rs *ReplicaSet) newReplica(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	rs.mu.Lock()
	i := rs.created
	rs.created++
	rs.mu.Unlock()
	r := &Replica{
		Name:     fmt.Sprintf("lockguard-%d", i),
		set:      rs,
		port:     port,
		certDir:  rs.o.CertDir(i),
		stopping: make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	r.restartDelay.Store(int64(time.Second))
	rs.mu.Lock()
	rs.running = append(rs.running, r)
	rs.mu.Unlock()
	fail := func(err error) error {
		_ = r.Delete()
		return err
	}
	first := make(chan error, 1)
	go r.run(first)
	if err := <-first; err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !r.ready.Load() {
		select {
		case <-r.Process().Exited():
			return fail(fmt.Errorf("%s exited before it was ready; its log:\n%s", r.Name, tail(r.LogPath(), 30)))
		case <-ctx.Done():
			return fail(fmt.Errorf("%s was not ready in time; its log:\n%s", r.Name, tail(r.LogPath(), 30)))
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Replica is one lockguard "pod" of a ReplicaSet: a webhook port and a
// certificate directory of its own, kept across restarts of its process.
type Replica struct {
	// Name is lockguard-<n>.
	Name string

	set     *ReplicaSet
	port    int
	certDir string

	mu     sync.Mutex
	cur    *Lockguard
	logs   []string
	starts int

	ready atomic.Bool
	// restartDelay is how long the supervisor waits before restarting an
	// exited process (ReplicaOptions.Restart), in nanoseconds.
	restartDelay atomic.Int64
	deleted      atomic.Bool
	stopping     chan struct{}
	stopped      chan struct{}
}

// Address is where the replica's webhook server listens.
func (r *Replica) Address() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// CertDir is the replica's certificate directory.
func (r *Replica) CertDir() string { return r.certDir }

// Ready reports whether the replica's last readiness probe passed.
func (r *Replica) Ready() bool { return r.ready.Load() }

// LogPath is the log of the replica's current (or last) process.
func (r *Replica) LogPath() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.logs) == 0 {
		return ""
	}
	return r.logs[len(r.logs)-1]
}

func (r *Replica) logPaths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.logs)
}

// Process returns the replica's current process, nil while it is down.
func (r *Replica) Process() *Lockguard {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// IsLeader reports whether the replica's process holds the leader Lease
// (Lockguard.IsLeader).
func (r *Replica) IsLeader(ctx context.Context) (bool, error) {
	lg := r.Process()
	if lg == nil {
		return false, nil
	}
	return lg.IsLeader(ctx)
}

// Kill SIGKILLs the replica's process (no graceful shutdown: the Lease is
// not released). With ReplicaOptions.Restart the replica comes back after
// delay, as kubelet restarts a killed container.
func (r *Replica) Kill(delay time.Duration) {
	r.restartDelay.Store(int64(delay))
	r.ready.Store(false)
	r.set.updateFront()
	if lg := r.Process(); lg != nil {
		lg.Kill()
	}
}

// Delete SIGKILLs the replica and removes it from the set, as deleting a
// pod with no grace period does.
func (r *Replica) Delete() error {
	rs := r.set
	rs.mu.Lock()
	i := slices.Index(rs.running, r)
	if i < 0 {
		rs.mu.Unlock()
		return fmt.Errorf("%s is not running", r.Name)
	}
	rs.running = slices.Delete(rs.running, i, i+1)
	rs.gone = append(rs.gone, r)
	rs.mu.Unlock()
	r.deleted.Store(true)
	r.Kill(0)
	close(r.stopping)
	// Its identity Lease stays until it expires (the others drop it
	// IdentityLease after its last renewal) or a replica collects it.
	<-r.stopped
	return nil
}

// shutdown stops the replica gracefully (SIGTERM) and waits for it.
func (r *Replica) shutdown() {
	r.ready.Store(false)
	r.set.updateFront()
	close(r.stopping)
	<-r.stopped
}

// run starts the replica's process, reports the first start's error on
// first, probes its readiness and, with ReplicaOptions.Restart, restarts
// it whenever it exits, until the replica is stopped.
func (r *Replica) run(first chan<- error) {
	defer close(r.stopped)
	defer r.set.updateFront()
	for {
		lg, logs, err := r.start()
		if first != nil {
			first <- err
			first = nil
			if err != nil {
				return
			}
		}
		if err == nil {
			r.probe(lg)
			select {
			case <-r.stopping:
				r.ready.Store(false)
				r.set.updateFront()
				_ = lg.Stop(45 * time.Second)
				logs.Close()
				return
			default:
			}
			r.ready.Store(false)
			r.set.updateFront()
			<-lg.Exited()
			logs.Close()
		}
		if !r.set.o.Restart || r.deleted.Load() {
			<-r.stopping
			return
		}
		select {
		case <-r.stopping:
			return
		case <-time.After(time.Duration(r.restartDelay.Load())):
		}
	}
}

// start starts a new process for the replica.
func (r *Replica) start() (*Lockguard, *os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts++
	path := filepath.Join(r.set.o.Dir, fmt.Sprintf("%s-%02d.log", r.Name, r.starts))
	logs, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	r.logs = append(r.logs, path)
	lg, err := StartLockguard(LockguardOptions{
		Binary:     r.set.o.Binary,
		Kubeconfig: r.set.o.Kubeconfig,
		Webhook:    &LocalWebhook{Host: "127.0.0.1", Port: r.port, CertDir: r.certDir},
		Metrics:    true,
		// The replicas find each other by their identity Leases, as in
		// the chart; the flags before r.set.o.Args, which override them.
		Args: append([]string{"--peer-service=" + r.set.group, "--peer-identity-lease=" + r.set.o.IdentityLease.String(), "--peer-address=" + r.Address(),
			"--pending-ttl=" + r.set.o.PendingTTL.String(),
			// InstallChart points the webhook configuration at the front.
			"--webhook-url=https://" + r.set.Webhook.Address()}, r.set.o.Args...),
		Logs: logs,
	})
	if err != nil {
		logs.Close()
		return nil, nil, err
	}
	r.cur = lg
	return lg, logs, nil
}

// probe polls /readyz every 200ms, like a readiness probe, keeping the
// front's rotation up to date, until the process exits or the replica is
// stopped.
func (r *Replica) probe(lg *Lockguard) {
	for {
		ok := lg.Ready()
		if r.ready.Swap(ok) != ok {
			r.set.updateFront()
		}
		select {
		case <-lg.Exited():
			return
		case <-r.stopping:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
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
