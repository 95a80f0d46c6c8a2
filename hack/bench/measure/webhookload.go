package measure

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// ReviewBody returns a JSON AdmissionReview of the DELETE of Stack ns/name,
// as the API server sends it, with an oldObject of about size bytes
// (managedFields included).
func ReviewBody(ns, name string, size int) ([]byte, error) {
	old := Stack(ns, name, 0)
	old.SetUID("6f1d9c1e-2b4a-4d7e-9f0a-1c2b3d4e5f60")
	old.SetResourceVersion("123456")
	old.SetGeneration(3)
	old.SetLabels(map[string]string{"app.kubernetes.io/name": "forge", "app.kubernetes.io/part-of": "navique"})
	old.SetManagedFields([]metav1.ManagedFieldsEntry{{
		Manager: "navique-operator", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "core.navique.com/v1alpha1",
		Time: ptr.To(metav1.Now()), FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{".":{},"f:environment":{},"f:payload":{}}}`)},
	}})
	raw, err := json.Marshal(old.Object)
	if err != nil {
		return nil, err
	}
	if pad := size - len(raw); pad > 0 {
		old.Object["spec"].(map[string]any)["payload"] = strings.Repeat("x", pad)
		if raw, err = json.Marshal(old.Object); err != nil {
			return nil, err
		}
	}
	gvk := metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}
	gvr := metav1.GroupVersionResource{Group: lockv1alpha1.Group, Version: "v1alpha1", Resource: "stacks"}
	return json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: "705ab4f5-6393-11e8-b7cc-42010a800002", Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
			Name: name, Namespace: ns, Operation: admissionv1.Delete,
			UserInfo:  authenticationv1.UserInfo{Username: "system:admin", Groups: []string{"system:masters", "system:authenticated"}},
			OldObject: runtime.RawExtension{Raw: raw},
			DryRun:    ptr.To(false),
			Options:   runtime.RawExtension{Raw: []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1","propagationPolicy":"Background"}`)},
		},
	})
}

// bareResponse is the bare server's fixed answer.
var bareResponse = []byte(`{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true,"status":{"metadata":{},"code":200}}}` + "\n")

// ServeBare runs the baseline of the webhook benchmark until the process
// is killed: a bare Go TLS HTTP/1.1 server, with lockguard's TLS settings
// and certificate, that reads each request body and answers a fixed
// AdmissionReview. hack/bench runs it in its own process, like lockguard.
func ServeBare(addr, certDir string) error {
	cert, err := tls.LoadX509KeyPair(filepath.Join(certDir, "tls.crt"), filepath.Join(certDir, "tls.key"))
	if err != nil {
		return err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	certs.ServerTLS(false)(cfg)
	l, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return err
	}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(bareResponse)
		}),
	}
	return srv.Serve(l)
}

// BareServer is the baseline server process.
type BareServer struct {
	cmd  *exec.Cmd
	Addr string
}

// StartBare runs `<self> -bare-server addr -bare-cert-dir dir` and waits
// until it accepts connections.
func StartBare(addr, certDir string) (*BareServer, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-bare-server", addr, "-bare-cert-dir", certDir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return &BareServer{cmd: cmd, Addr: addr}, nil
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("the bare server did not start: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop kills the bare server.
func (b *BareServer) Stop() {
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
}

// LoadClient returns an HTTP/1.1 client with up to conns keep-alive
// connections, trusting ca.
func LoadClient(ca []byte, conns int) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:     &tls.Config{RootCAs: pool, NextProtos: []string{"http/1.1"}},
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
			TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		},
	}
}

// LoadResult is the outcome of a load run.
type LoadResult struct {
	Requests int
	Errors   int
	Elapsed  time.Duration
	Latency  Latencies
	// FirstError is the first error seen, if any.
	FirstError error
}

// Throughput is requests per second.
func (r *LoadResult) Throughput() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// post sends one review and checks the answer allows it.
func post(hc *http.Client, url string, body []byte) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, */*")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	var buf [512]byte
	n, _ := io.ReadFull(resp.Body, buf[:])
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, buf[:n])
	}
	if !bytes.Contains(buf[:n], []byte(`"allowed":true`)) {
		return fmt.Errorf("not allowed: %s", buf[:n])
	}
	return nil
}

// tally counts the answers of a load run's connections into res.
type tally struct {
	res     *LoadResult
	n, errs atomic.Int64
	once    sync.Once
}

// post sends one review to url and counts its answer, its latency from
// since.
func (t *tally) post(hc *http.Client, url string, body []byte, since time.Time) {
	if err := post(hc, url, body); err != nil {
		t.errs.Add(1)
		t.once.Do(func() { t.res.FirstError = err })
		return
	}
	t.res.Latency.Add(time.Since(since))
	t.n.Add(1)
}

// result returns res with the counts, the run having started at start.
func (t *tally) result(start time.Time) *LoadResult {
	t.res.Elapsed = time.Since(start)
	t.res.Requests, t.res.Errors = int(t.n.Load()), int(t.errs.Load())
	return t.res
}

// ClosedLoop posts body to url from conns goroutines, each sending its
// next request when the previous one is answered, for d.
func ClosedLoop(ctx context.Context, hc *http.Client, url string, body []byte, conns int, d time.Duration) *LoadResult {
	t := &tally{res: &LoadResult{}}
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && time.Now().Before(stop) {
				t.post(hc, url, body, time.Now())
			}
		}()
	}
	wg.Wait()
	return t.result(start)
}

// OpenLoop posts body to url at a constant rate for d, from up to conns
// connections. Latency counts from the moment each request was due, so
// that a stalled server is not hidden by requests not sent
// (coordinated omission).
func OpenLoop(ctx context.Context, hc *http.Client, url string, body []byte, conns int, rate float64, d time.Duration) *LoadResult {
	t := &tally{res: &LoadResult{}}
	total := int(rate * d.Seconds())
	due := make(chan time.Time, total)
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for at := range due {
				t.post(hc, url, body, at)
			}
		}()
	}
	start := time.Now()
	interval := time.Duration(float64(time.Second) / rate)
	sent := 0
	for sent < total && ctx.Err() == nil {
		now := time.Now()
		for ; sent < total; sent++ {
			at := start.Add(time.Duration(sent) * interval)
			if at.After(now) {
				break
			}
			due <- at
		}
		time.Sleep(200 * time.Microsecond)
	}
	close(due)
	wg.Wait()
	return t.result(start)
}

// WebhookResult is the outcome of the webhook server benchmark.
type WebhookResult struct {
	BodyBytes int
	Conns     int
	Rounds    []WebhookRound
	RoundTime time.Duration // of each server's closed loop in a round
	BareRPS   float64       // median
	LockRPS   float64       // median
	Ratio     float64       // median of the per-round lockguard/bare ratios
	HalfRate  float64
	LockHalf  *LoadResult
	BareHalf  *LoadResult
	// CPU time of each server process per request in the closed-loop rounds.
	LockCPUPerReq, BareCPUPerReq time.Duration
}

// WebhookRound is one closed-loop round of each server.
type WebhookRound struct {
	Bare, Lock *LoadResult
}

// WebhookOptions size the webhook server benchmark.
type WebhookOptions struct {
	Rounds    int
	RoundTime time.Duration
	HalfTime  time.Duration
	Conns     int
	BodySize  int
}

// BenchWebhook loads lockguard's webhook server (already running at
// c.Webhook) and a bare server with the same certificate, side by side.
func (c *Cluster) BenchWebhook(ctx context.Context, lg *Lockguard, o WebhookOptions) (*WebhookResult, error) {
	body, err := ReviewBody("bench-webhook", "unlocked", o.BodySize)
	if err != nil {
		return nil, err
	}
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	bare, err := StartBare(fmt.Sprintf("127.0.0.1:%d", port), c.Webhook.CertDir)
	if err != nil {
		return nil, err
	}
	defer bare.Stop()
	lockURL := "https://" + c.Webhook.Address() + webhook.Path
	bareURL := "https://" + bare.Addr + webhook.Path
	hc := LoadClient(c.Webhook.CA, o.Conns)
	// Warm up both: connections, TLS sessions, caches.
	for _, u := range []string{lockURL, bareURL} {
		if r := ClosedLoop(ctx, hc, u, body, o.Conns, 500*time.Millisecond); r.Errors > 0 {
			return nil, fmt.Errorf("warm-up of %s: %d errors, first: %v", u, r.Errors, r.FirstError)
		}
	}
	res := &WebhookResult{BodyBytes: len(body), Conns: o.Conns, RoundTime: o.RoundTime}
	var bareRPS, lockRPS, ratios []float64
	var lockCPU, bareCPU time.Duration
	var lockReqs, bareReqs int
	for i := range o.Rounds {
		var round WebhookRound
		run := func(lock bool) {
			if lock {
				cpu0, _ := lg.CPUTime()
				round.Lock = ClosedLoop(ctx, hc, lockURL, body, o.Conns, o.RoundTime)
				cpu1, _ := lg.CPUTime()
				lockCPU += cpu1 - cpu0
				lockReqs += round.Lock.Requests
			} else {
				cpu0, _ := cpuTime(bare.cmd.Process.Pid)
				round.Bare = ClosedLoop(ctx, hc, bareURL, body, o.Conns, o.RoundTime)
				cpu1, _ := cpuTime(bare.cmd.Process.Pid)
				bareCPU += cpu1 - cpu0
				bareReqs += round.Bare.Requests
			}
		}
		// Alternate which goes first.
		run(i%2 == 1)
		run(i%2 == 0)
		for _, r := range []*LoadResult{round.Bare, round.Lock} {
			if r.Errors > 0 {
				return nil, fmt.Errorf("round %d: %d errors, first: %v", i, r.Errors, r.FirstError)
			}
		}
		res.Rounds = append(res.Rounds, round)
		bareRPS = append(bareRPS, round.Bare.Throughput())
		lockRPS = append(lockRPS, round.Lock.Throughput())
		ratios = append(ratios, round.Lock.Throughput()/round.Bare.Throughput())
	}
	res.BareRPS, res.LockRPS, res.Ratio = median(bareRPS), median(lockRPS), median(ratios)
	res.LockCPUPerReq = lockCPU / time.Duration(max(lockReqs, 1))
	res.BareCPUPerReq = bareCPU / time.Duration(max(bareReqs, 1))
	res.HalfRate = res.BareRPS / 2
	res.LockHalf = OpenLoop(ctx, hc, lockURL, body, o.Conns, res.HalfRate, o.HalfTime)
	res.BareHalf = OpenLoop(ctx, hc, bareURL, body, o.Conns, res.HalfRate, o.HalfTime)
	if res.LockHalf.Errors > 0 {
		return res, fmt.Errorf("lockguard at half rate: %d errors, first: %v", res.LockHalf.Errors, res.LockHalf.FirstError)
	}
	return res, nil
}
