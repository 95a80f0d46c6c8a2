package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/navique/lockguard/e2e/framework"
)

// Lockguard is the lockguard binary running as its ServiceAccount, with
// plain-HTTP metrics on loopback.
type Lockguard struct {
	cmd         *exec.Cmd
	started     time.Time
	exited      chan struct{}
	err         error
	probeAddr   string
	metricsAddr string
}

// StartLockguard runs binary against c, serving the webhook at c.Webhook,
// with extra flags args (which override the defaults).
func (c *Cluster) StartLockguard(binary string, args ...string) (*Lockguard, error) {
	probe, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	metrics, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	l := &Lockguard{
		exited:      make(chan struct{}),
		probeAddr:   "127.0.0.1:" + strconv.Itoa(probe),
		metricsAddr: "127.0.0.1:" + strconv.Itoa(metrics),
	}
	all := append([]string{
		"--kubeconfig=" + c.LockguardKubeconfig,
		"--webhook-host=" + c.Webhook.Host,
		"--webhook-port=" + strconv.Itoa(c.Webhook.Port),
		"--cert-dir=" + c.Webhook.CertDir,
		"--health-probe-bind-address=" + l.probeAddr,
		"--metrics-bind-address=" + l.metricsAddr,
		"--metrics-secure=false",
		"--leader-elect=true",
		"--leader-election-namespace=" + framework.ServiceAccountNamespace,
		// A restarted lockguard takes the Lease at once.
		"--leader-election-lease-duration=4s",
		"--leader-election-renew-deadline=3s",
		"--leader-election-retry-period=500ms",
	}, append(c.LockguardArgs, args...)...)
	l.cmd = exec.Command(binary, all...)
	l.cmd.Stdout, l.cmd.Stderr = c.Logs, c.Logs
	l.started = time.Now()
	if err := l.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", binary, err)
	}
	go func() {
		l.err = l.cmd.Wait()
		close(l.exited)
	}()
	return l, nil
}

// Pid is the process id.
func (l *Lockguard) Pid() int { return l.cmd.Process.Pid }

// WaitReady waits until /readyz answers 200 and returns the time since the
// process started.
func (l *Lockguard) WaitReady(ctx context.Context) (time.Duration, error) {
	hc := &http.Client{Timeout: time.Second}
	for {
		resp, err := hc.Get("http://" + l.probeAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(l.started), nil
			}
		}
		select {
		case <-l.exited:
			return 0, fmt.Errorf("lockguard exited before it was ready: %v", l.err)
		case <-ctx.Done():
			return 0, fmt.Errorf("lockguard not ready: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Stop sends SIGTERM and waits (SIGKILL after 30s).
func (l *Lockguard) Stop() {
	_ = l.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-l.exited:
	case <-time.After(30 * time.Second):
		_ = l.cmd.Process.Kill()
		<-l.exited
	}
}

// RSS returns the resident set size of the process, from /proc.
func (l *Lockguard) RSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", l.Pid()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", l.Pid())
}

// CPUTime returns the user+system CPU time the process has used.
func (l *Lockguard) CPUTime() (time.Duration, error) { return cpuTime(l.Pid()) }

// cpuTime returns the user+system CPU time process pid has used.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name, which is in parentheses.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100, nil // USER_HZ is 100 on Linux.
}

// Metrics scrapes the metrics endpoint and returns the value of every
// sample without labels, and of labelled samples by their full name.
func (l *Lockguard) Metrics() (map[string]float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + l.metricsAddr + "/metrics")
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

// Memory is a memory sample of the process.
type Memory struct {
	RSS       int64 // resident set size
	HeapInuse int64 // go_memstats_heap_inuse_bytes
	HeapAlloc int64 // go_memstats_heap_alloc_bytes
}

// Memory samples the process's memory: RSS from /proc, heap from metrics.
func (l *Lockguard) Memory() (Memory, error) {
	rss, err := l.RSS()
	if err != nil {
		return Memory{}, err
	}
	m, err := l.Metrics()
	if err != nil {
		return Memory{}, err
	}
	return Memory{RSS: rss, HeapInuse: int64(m["go_memstats_heap_inuse_bytes"]), HeapAlloc: int64(m["go_memstats_heap_alloc_bytes"])}, nil
}

// ProcessCPU returns the CPU time used so far by each direct child process
// of this one (etcd, kube-apiserver, lockguard…), by command name.
func ProcessCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+2:])
		if len(fields) < 13 {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid != self {
			continue
		}
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		name := s[open+1 : end]
		if strings.HasPrefix(name, "lockguard") {
			name = "lockguard" // whatever the binary is called
		}
		out[name] += time.Duration(utime+stime) * time.Second / 100
	}
	return out
}
