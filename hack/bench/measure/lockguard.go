package measure

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/navique/lockguard/e2e/framework"
)

// Lockguard is the lockguard binary running as its ServiceAccount
// (framework.StartLockguard), with plain-HTTP metrics on loopback.
type Lockguard struct {
	*framework.Lockguard
	tail *tailWriter
}

// tailWriter keeps the last 8 KiB written to it.
type tailWriter struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the end of p (io.Writer).
func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 8<<10; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns what is kept.
func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// ExitError returns an error, with the end of the process's output, when
// it has exited; nil while it runs.
func (l *Lockguard) ExitError() error {
	select {
	case <-l.Exited():
		return fmt.Errorf("lockguard exited; its last output:\n%s", l.tail.String())
	default:
		return nil
	}
}

// StartLockguard runs binary against c, serving the webhook at c.Webhook,
// with extra flags args (which override the defaults).
func (c *Cluster) StartLockguard(binary string, args ...string) (*Lockguard, error) {
	return c.StartLockguardOn(c.Webhook, binary, args...)
}

// StartLockguardOn is StartLockguard serving the webhook at wh.
func (c *Cluster) StartLockguardOn(wh *framework.LocalWebhook, binary string, args ...string) (*Lockguard, error) {
	tail := &tailWriter{}
	var logs io.Writer = tail
	if c.Logs != nil {
		logs = io.MultiWriter(c.Logs, tail)
	}
	lg, err := framework.StartLockguard(framework.LockguardOptions{
		Binary:     binary,
		Kubeconfig: c.LockguardKubeconfig,
		Webhook:    wh,
		Metrics:    true,
		Logs:       logs,
		Env:        c.LockguardEnv,
		Args: append([]string{
			// A restarted lockguard takes the Lease at once.
			"--leader-election-lease-duration=4s",
			"--leader-election-renew-deadline=3s",
			"--leader-election-retry-period=500ms",
		}, append(c.LockguardArgs, args...)...),
	})
	if err != nil {
		return nil, err
	}
	return &Lockguard{Lockguard: lg, tail: tail}, nil
}

// WaitReady waits until /readyz answers 200 and returns the time since the
// process started.
func (l *Lockguard) WaitReady(ctx context.Context) (time.Duration, error) {
	if err := l.Lockguard.WaitReady(ctx); err != nil {
		return 0, err
	}
	return time.Since(l.Started), nil
}

// WaitWarm waits until lockguard decides from its cache the deletes it
// would allow (lockguard_replica_warm 1: internal/peers), so that a
// measurement of the default mode is not one of its first seconds, when it
// still confirms each with the API server. A lockguard without the metric
// (--cache-only-decisions) is warm at once.
func (l *Lockguard) WaitWarm(ctx context.Context) error {
	for {
		m, err := l.Metrics()
		if err != nil {
			return err
		}
		v, ok := m["lockguard_replica_warm"]
		if !ok || v == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lockguard did not become warm: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ColdConfirmations returns how many allowed deletes lockguard confirmed
// with the API server because it was not warm
// (lockguard_confirmations_total{reason="cold"}: internal/peers): 0
// for a lockguard without the metric (--cache-only-decisions).
func (l *Lockguard) ColdConfirmations() (float64, error) {
	m, err := l.Metrics()
	if err != nil {
		return 0, err
	}
	return m[`lockguard_confirmations_total{reason="cold"}`], nil
}

// StayedWarm returns a check that fails when lockguard confirmed an
// allowed delete because it was cold between the call and the check's: a
// measurement of the default mode in which the replica went cold measured
// the API server's reads, not the cache's decisions.
func (l *Lockguard) StayedWarm() (func() error, error) {
	before, err := l.ColdConfirmations()
	if err != nil {
		return nil, err
	}
	return func() error {
		after, err := l.ColdConfirmations()
		if err != nil {
			return err
		}
		if after > before {
			return fmt.Errorf("lockguard went cold while measured: it confirmed %v allowed deletes with the API server (lockguard_confirmations_total{reason=\"cold\"}); its log says why", after-before)
		}
		return nil
	}, nil
}

// Stop sends SIGTERM and waits (SIGKILL after 30s).
func (l *Lockguard) Stop() { _ = l.Lockguard.Stop(30 * time.Second) }

// RSS returns the resident set size of the process, from /proc.
func (l *Lockguard) RSS() (int64, error) { return l.procStatus("VmRSS") }

// PeakRSS returns the largest resident set size of the process since it
// started (VmHWM in /proc).
func (l *Lockguard) PeakRSS() (int64, error) { return l.procStatus("VmHWM") }

// watchAnon samples the process's anonymous RSS (RssAnon) every
// interval until the function it returns is called, which returns the
// largest sample.
func (l *Lockguard) watchAnon(every time.Duration) func() int64 {
	return watchPeak(every, func() (int64, error) { return l.procStatus("RssAnon") }, func(a, b int64) bool { return a < b })
}

// watchPeak calls sample every interval until the function it returns is
// called, which returns the largest sample (by less).
func watchPeak[T any](every time.Duration, sample func() (T, error), less func(a, b T) bool) func() T {
	var (
		mu   sync.Mutex
		peak T
	)
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if v, err := sample(); err == nil {
				mu.Lock()
				if less(peak, v) {
					peak = v
				}
				mu.Unlock()
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() T {
		close(done)
		<-finished
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// procStatus returns field (in kB there) of /proc/<pid>/status, in bytes.
func (l *Lockguard) procStatus(field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", l.Pid()))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, l.Pid())
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
// sample by its full name.
func (l *Lockguard) Metrics() (map[string]float64, error) {
	return l.Lockguard.Metrics(context.Background())
}

// LiveHeap forces a garbage collection in the process through its Go
// profiler at pprofAddr (--pprof-bind-address; /debug/pprof/heap?gc=1),
// writes the heap profile to profile (when not ""), and returns
// go_memstats_heap_alloc_bytes read just after: the live heap.
func (l *Lockguard) LiveHeap(ctx context.Context, pprofAddr, profile string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pprofAddr+"/debug/pprof/heap?gc=1", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, fmt.Errorf("forcing a collection: %w", err)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("forcing a collection: HTTP %d (%v)", resp.StatusCode, err)
	}
	m, err := l.Metrics()
	if err != nil {
		return 0, err
	}
	if profile != "" {
		if err := os.WriteFile(profile, body, 0o644); err != nil {
			return 0, err
		}
	}
	return int64(m["go_memstats_heap_alloc_bytes"]), nil
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
