package contract_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/webhook"
)

// Slow-body attack: slowBodies TLS connections each declare a body of
// slowBodyLength bytes to one of slowBodyPaths in turn, send one byte and
// stall; bigHeaders more each send a header of bigHeaderLength bytes.
const (
	slowBodies      = 100
	bigHeaders      = 100
	bigHeaderLength = 1 << 20
	slowBodyLength  = 7_000_000
	// slowBodyHeapBound is how far above its idle Go heap lockguard's may
	// go while the slow bodies stall (with GOGC=25, see below). Measured:
	// +2.6 MiB on 1.37.2, +1.8 MiB on 1.29.15 (a 4 KiB body buffer,
	// net/http's and crypto/tls's buffers and a goroutine per connection);
	// on the code before bounded reads, +672.6 MiB. 16 MiB leaves room
	// for a loaded machine and still fails by a factor of 40 on the old
	// code.
	slowBodyHeapBound = 16 << 20
	// slowBodyCutOff bounds how long the server may hold a stalled body:
	// the default read deadline of a review without ?timeout= (30 s) plus
	// a margin for a loaded machine.
	slowBodyCutOff = 60 * time.Second
)

// startBinary builds and starts the lockguard binary against the suite's
// API server (no leader election, metrics on), with GOGC=25: a garbage
// collection at 25% growth rather than 100% keeps the heap the metrics
// report within a quarter of the live heap, so that the samples compare
// what is held rather than when garbage was collected. It stops it when
// the test ends.
func startBinary(t *testing.T) *framework.Lockguard {
	t.Helper()
	dir := t.TempDir()
	bin, err := framework.BuildLockguard(dir)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	if err := framework.WriteKubeconfig(suite.env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GOGC", "25")
	logs, err := os.Create(filepath.Join(dir, "lockguard.log"))
	if err != nil {
		t.Fatal(err)
	}
	lg, err := framework.StartLockguard(framework.LockguardOptions{
		Binary: bin, Kubeconfig: kubeconfig, Dir: dir, Metrics: true, Logs: logs,
		Args: []string{"--leader-elect=false"},
	})
	if err != nil {
		logs.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lg.Stop(30 * time.Second); err != nil {
			t.Error(err)
		}
		logs.Close()
		if t.Failed() {
			t.Logf("lockguard's log: %s", logs.Name())
		}
	})
	readyCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := lg.WaitReady(readyCtx); err != nil {
		t.Fatal(err)
	}
	return lg
}

// dryRunReviews gives lg a namespace of its own, with a webhook
// configuration (the chart's, pointed at the binary, named vwcName) that
// selects only it, a locked and an unlocked Stack, and returns reviews,
// which sends a dry-run delete of each through the API server and returns
// how long the slower took, or what was wrong (the locked one not denied,
// the unlocked one not allowed, either answered after the webhook's
// timeout), and that timeout. It waits until the configuration is in
// effect.
func dryRunReviews(t *testing.T, lg *framework.Lockguard, prefix, vwcName string) (reviews func() (time.Duration, error), webhookTimeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	c := kube.Client
	// A namespace of its own, with a webhook configuration (the chart's,
	// pointed at the binary) that selects only it.
	ns, vwc := webhookForNamespace(t, lg.Webhook, prefix, vwcName)
	webhookTimeout = time.Duration(*vwc.Webhooks[0].TimeoutSeconds) * time.Second

	for _, name := range []string{"locked", "free"} {
		if err := c.Create(ctx, framework.Object(framework.StackGVK, ns, name)); err != nil {
			t.Fatal(err)
		}
	}
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-locked"},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "locked"}},
	}
	if err := c.Create(ctx, lock); err != nil {
		t.Fatal(err)
	}
	// reviews sends both dry-run deletes and returns how long the slower
	// took, or what was wrong.
	reviews = func() (time.Duration, error) {
		var slowest time.Duration
		for _, tc := range []struct {
			name   string
			denied bool
		}{{"locked", true}, {"free", false}} {
			dctx, cancel := context.WithTimeout(ctx, 2*webhookTimeout)
			start := time.Now()
			err := c.Delete(dctx, framework.Object(framework.StackGVK, ns, tc.name), client.DryRunAll)
			took := time.Since(start)
			cancel()
			slowest = max(slowest, took)
			switch {
			case tc.denied && !isDenial(err, vwc.Webhooks[0].Name, lock.Name):
				return took, fmt.Errorf("dry-run delete of the locked Stack after %s: %v, want the denial", took, err)
			case !tc.denied && err != nil:
				return took, fmt.Errorf("dry-run delete of the unlocked Stack after %s: %v, want it allowed", took, err)
			case took > webhookTimeout:
				return took, fmt.Errorf("dry-run delete of Stack %s answered after %s, over the webhook's timeout %s", tc.name, took, webhookTimeout)
			}
		}
		return slowest, nil
	}
	framework.Eventually(t, time.Minute, "the webhook configuration in effect", func(context.Context) error {
		_, err := reviews()
		return err
	})

	return reviews, webhookTimeout
}

// slowBodyPaths are every path of the webhook server: the admission paths
// hold a stalled body until its deadline, the peer paths refuse a caller
// without a replica's certificate before reading a byte of it.
var slowBodyPaths = []string{webhook.Path, webhook.CreatePath, peers.SubscribePath, peers.PendingPath}

// admissionSlowBodies is how many of the slow bodies go to admission paths.
var admissionSlowBodies = slowBodies / len(slowBodyPaths) * 2

// TestSlowBodies runs the lockguard binary behind a webhook configuration
// of one namespace, opens slowBodies TLS connections that each declare a
// 7,000,000-byte body to every path of the port in turn, send its first
// byte and stall, and bigHeaders that send a 1 MiB header, and,
// while they stall, sends dry-run deletes through the real API server: of
// a locked Stack (denied) and of an unlocked one (allowed), each answered
// within the webhook's timeout. lockguard's Go heap must stay within
// slowBodyHeapBound of its idle heap (it allocates what arrives, not what
// a client declares), and every stalled connection must be cut off once
// its body's read deadline passes.
func TestSlowBodies(t *testing.T) {
	inProcess(t)
	lg := startBinary(t)

	reviews, webhookTimeout := dryRunReviews(t, lg, "hostile-slow", "lockguard-hostile-slow")

	idle := sampleMemory(t, lg, 10, reviews)
	t.Logf("idle: Go heap max %.1f MiB, RSS max %.1f MiB over %d samples", mib(idle.heap), mib(idle.rss), idle.samples)

	conns, err := openSlowBodies(lg.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	stalledAt := time.Now()
	defer func() {
		for _, conn := range conns {
			conn.Close()
		}
	}()
	headers, err := openBigHeaders(lg.Webhook)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, conn := range headers {
			conn.Close()
		}
	}()
	// Every slow body of an admission path has reached its handler.
	framework.Eventually(t, time.Minute, "the slow bodies in the webhook handlers", func(ctx context.Context) error {
		m, err := lg.Metrics(ctx)
		if err != nil {
			return err
		}
		n := 0.0
		for _, path := range []string{webhook.Path, webhook.CreatePath} {
			n += m[`controller_runtime_webhook_requests_in_flight{webhook="`+path+`"}`]
		}
		if n < float64(admissionSlowBodies) {
			return fmt.Errorf("%v slow bodies in the admission handlers, want at least %d", n, admissionSlowBodies)
		}
		return nil
	})

	attacked := sampleMemory(t, lg, 10, reviews)
	t.Logf("%d slow bodies stalled (on %v) and %d headers of %d bytes sent: Go heap max %.1f MiB (%+.1f MiB over idle), RSS max %.1f MiB (%+.1f MiB); slowest review %s, every review answered within %s",
		slowBodies, slowBodyPaths, bigHeaders, bigHeaderLength, mib(attacked.heap), mib(attacked.heap-idle.heap), mib(attacked.rss), mib(attacked.rss-idle.rss), attacked.slowest.Round(time.Millisecond), webhookTimeout)
	if attacked.heap > idle.heap+slowBodyHeapBound {
		t.Errorf("Go heap %.1f MiB while %d bodies of %d bytes stall, over idle (%.1f MiB) + %.0f MiB: lockguard allocates what clients declare",
			mib(attacked.heap), slowBodies, slowBodyLength, mib(idle.heap), mib(slowBodyHeapBound))
	}

	// Every stalled body is cut off.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		held    int
		slowest time.Duration
	)
	for _, conn := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = conn.SetReadDeadline(stalledAt.Add(slowBodyCutOff))
			buf := make([]byte, 4096)
			for {
				_, err := conn.Read(buf)
				if err == nil {
					continue // The server's answer, if any, before it closes.
				}
				mu.Lock()
				defer mu.Unlock()
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					held++
				} else {
					slowest = max(slowest, time.Since(stalledAt))
				}
				return
			}
		}()
	}
	wg.Wait()
	if held > 0 {
		t.Errorf("%d of %d stalled bodies still held by the server %s after they stalled", held, slowBodies, slowBodyCutOff)
	} else {
		t.Logf("every stalled body cut off, the last %s after it stalled", slowest.Round(100*time.Millisecond))
	}
	if _, err := reviews(); err != nil {
		t.Errorf("after the slow bodies: %v", err)
	}
	m, err := lg.Metrics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	timedOut := `lockguard_webhook_requests_refused_total{reason="read_timeout"}`
	if got := m[timedOut]; got < float64(admissionSlowBodies) {
		t.Errorf("%s = %v, want at least %d", timedOut, got, admissionSlowBodies)
	}
}

// openSlowBodies opens slowBodies TLS connections to wh, each sending the
// headers of a slowBodyLength-byte body to one of slowBodyPaths in turn,
// and its first byte.
func openSlowBodies(wh *framework.LocalWebhook) ([]net.Conn, error) {
	heads := make([]string, len(slowBodyPaths))
	for i, path := range slowBodyPaths {
		heads[i] = "POST " + path + " HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(slowBodyLength) + "\r\n\r\n{"
	}
	return openConns(wh, slowBodies, func(i int) string { return heads[i%len(heads)] })
}

// openBigHeaders opens bigHeaders TLS connections to wh, each sending a
// request whose header is bigHeaderLength bytes.
func openBigHeaders(wh *framework.LocalWebhook) ([]net.Conn, error) {
	head := "POST " + peers.PendingPath + " HTTP/1.1\r\nHost: lockguard\r\nX-Pad: " + strings.Repeat("a", bigHeaderLength) + "\r\n\r\n"
	return openConns(wh, bigHeaders, func(int) string { return head })
}

// openConns opens n TLS connections to wh and writes send(i) on the i-th;
// a write the server cuts short is no error.
func openConns(wh *framework.LocalWebhook, n int, send func(i int) string) ([]net.Conn, error) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(wh.CA)
	cfg := &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}}
	conns := make([]net.Conn, 0, n)
	for i := range n {
		conn, err := tls.Dial("tcp", wh.Address(), cfg)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, err
		}
		conns = append(conns, conn)
		_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, _ = conn.Write([]byte(send(i)))
	}
	return conns, nil
}

// memory is what sampleMemory saw.
type memory struct {
	heap, rss float64 // the largest sample, bytes
	slowest   time.Duration
	samples   int
}

// sampleMemory sends reviews and reads lockguard's Go heap
// (go_memstats_heap_alloc_bytes) and RSS n times, and returns the largest
// of each and the slowest review; a failed review fails the test.
func sampleMemory(t *testing.T, lg *framework.Lockguard, n int, reviews func() (time.Duration, error)) memory {
	t.Helper()
	var out memory
	for range n {
		took, err := reviews()
		if err != nil {
			t.Fatal(err)
		}
		out.slowest = max(out.slowest, took)
		m, err := lg.Metrics(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		heap, ok := m["go_memstats_heap_alloc_bytes"]
		if !ok {
			t.Fatal("no go_memstats_heap_alloc_bytes in lockguard's metrics")
		}
		out.heap = max(out.heap, heap)
		out.rss = max(out.rss, rss(t, lg.Pid()))
		out.samples++
	}
	return out
}

// rss returns the resident set size of process pid, in bytes.
func rss(t *testing.T, pid int) float64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb * 1024
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

func mib(b float64) float64 { return b / (1 << 20) }
