//go:build e2e

package hostile

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

// The flood: floodConns certless TLS connections per attack.
const (
	floodConns = 1100
	// halfBodyLength is the body each unread connection declares: under
	// the 256 KiB that net/http drains after a handler that did not read
	// it.
	halfBodyLength = 1000
	// answerWithin bounds how long an early answer may take to arrive
	// and its connection to close, on a loaded machine.
	answerWithin = 10 * time.Second
	// dialTimeout bounds a hostile connection's dial and handshake: a
	// connection the server does not accept (its slots are full) gives
	// up.
	dialTimeout = 5 * time.Second
	// headerPad is the header line each half header sends, unfinished:
	// as much as the server reads before it answers 431.
	headerPad = transport.DefaultMaxHeaderBytes
)

// unreadPaths are the paths whose answer comes before the body is read:
// the replicas' endpoints refuse a caller without a replica's
// certificate (403), and a path nothing serves (404).
var unreadPaths = []string{peers.PendingPath, peers.SubscribePath, "/no-such-path"}

// TestConnectionFlood: certless clients on other loopback addresses than
// the API server's open 1,100 connections at once, first each sending
// the header and the first byte of a body on a path answered before the
// body is read (/peers/*, an unknown path), then each sending half a
// header; while each flood is open, the API server's deletes (of a locked
// Stack, denied; of an unlocked one, allowed), a Lock create, and a
// review sent on a new connection (as a second API server would) are
// answered within their timeouts. Every connection of the first flood is
// answered and closed (issue 36, item 1).
func TestConnectionFlood(t *testing.T) {
	t.Run("UnreadBodies", func(t *testing.T) {
		checks := prepareChecks(t, "unread")
		unread := flood(t, []string{"127.0.0.2"}, func(i int) string {
			return "POST " + unreadPaths[i%len(unreadPaths)] + " HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: " +
				strconv.Itoa(halfBodyLength) + "\r\n\r\n{"
		})
		defer unread.close()
		checks.run(t)
		answered, refused, held := unread.outcomes(answerWithin)
		report(t, "%d connections sending half a body to %v: %d answered and closed (%s), %d closed before their request, %d not accepted within %s, %d held open after %s",
			floodConns, unreadPaths, len(answered), statusCounts(answered), refused, unread.notAccepted, dialTimeout, held, answerWithin)
		if held > 0 || unread.notAccepted > 0 {
			t.Errorf("%d of %d connections sending half a body to %v held open %s after their request, %d not accepted: the port can be jammed",
				held, floodConns, unreadPaths, answerWithin, unread.notAccepted)
		}
		for _, a := range answered {
			if !strings.HasPrefix(a, "HTTP/1.1 403 ") && !strings.HasPrefix(a, "HTTP/1.1 404 ") || !strings.Contains(a, "\r\nConnection: close\r\n") {
				t.Errorf("an unread body's answer: %.200q, want 403 or 404 with Connection: close", a)
				break
			}
		}
	})
	t.Run("HalfHeaders", func(t *testing.T) {
		// Half a header holds a connection until ReadHeaderTimeout (32 s):
		// the two addresses hold every slot the server has, each with
		// as much header as the server reads.
		checks := prepareChecks(t, "headers")
		before := memory(t)
		head := "POST " + webhook.Path + " HTTP/1.1\r\nHost: lockguard\r\nX-Pad: " + strings.Repeat("a", headerPad)
		holders := flood(t, []string{"127.0.0.3", "127.0.0.4"}, func(int) string { return head })
		defer holders.close()
		checks.run(t)
		during := memory(t)
		open := holders.stillOpen()
		report(t, "%d connections from 127.0.0.3 and 127.0.0.4 sending a header of %d KiB, unfinished: %d accepted (%d not accepted within %s), %d still open after the checks; lockguard before and after the checks: %s, %s",
			floodConns, headerPad>>10, len(holders.conns), holders.notAccepted, dialTimeout, open, before, during)
		// 512 per address (--webhook-max-connections-per-source), less
		// those that gave way to the connections of the checks.
		if open < 1000 {
			t.Errorf("%d connections sending half a header still open after the checks, want at least 1000: the flood did not fill the port", open)
		}
	})
}

// checks are what the API server needs of lockguard while a flood is
// open, each answered within its timeout: a review on a new connection, a
// denied and an allowed delete, and a Lock create.
type checks struct {
	ns     string
	lock   *lockv1alpha1.Lock
	locked *unstructured.Unstructured
}

// prepareChecks creates, before a flood, the namespace and objects of the
// checks: a locked Stack, and two unlocked ones.
func prepareChecks(t *testing.T, prefix string) checks {
	t.Helper()
	ns := kube.NewNamespace(t, prefix)
	for _, name := range []string{"locked", "free", "late"} {
		kube.CreateObject(t, framework.StackGVK, ns, name)
	}
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep", "Stack", "locked", "hostile clients"))
	kube.WaitActive(t, lock)
	return checks{ns: ns, lock: lock, locked: kube.MustExist(t, framework.StackGVK, ns, "locked")}
}

// run runs the checks and reports how long each took.
func (c checks) run(t *testing.T) {
	t.Helper()
	ns, lock, locked := c.ns, c.lock, c.locked
	ctx := t.Context()
	var took []string
	timed := func(what string, timeout time.Duration, f func(context.Context) error) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		start := time.Now()
		err := f(cctx)
		d := time.Since(start)
		took = append(took, fmt.Sprintf("%s %s", what, d.Round(time.Millisecond)))
		if err != nil {
			t.Errorf("%s, after %s: %v", what, d.Round(time.Millisecond), err)
		}
	}
	// 10 s: twice the chart's timeoutSeconds (5), for a loaded machine.
	timed("review on a new connection", 10*time.Second, func(ctx context.Context) error {
		return reviewOnNewConnection(ctx, deleteReview(t, locked), framework.DenialMessage(lock))
	})
	timed("locked delete", 15*time.Second, func(ctx context.Context) error {
		err := kube.DeleteObject(ctx, framework.StackGVK, ns, "locked")
		if err == nil || err.Error() != kube.DenialError(lock) {
			return fmt.Errorf("got %v, want %q", err, kube.DenialError(lock))
		}
		return nil
	})
	timed("unlocked delete", 15*time.Second, func(ctx context.Context) error {
		return kube.DeleteObject(ctx, framework.StackGVK, ns, "free")
	})
	timed("Lock create", 15*time.Second, func(ctx context.Context) error {
		return kube.Client.Create(ctx, framework.NewLock(ns, "keep-late", "Stack", "late", "hostile clients"))
	})
	report(t, "while %d connections were open: %s", floodConns, strings.Join(took, ", "))
}

// reviewOnNewConnection posts review to lockguard on a connection of its
// own from 127.0.0.1 and checks that it is denied with message.
func reviewOnNewConnection(ctx context.Context, review *admissionv1.AdmissionReview, message string) error {
	body, err := json.Marshal(review)
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: target.tls, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+target.lg.Webhook.Address()+webhook.Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Errorf("HTTP %d %.200q: %w", resp.StatusCode, data, err)
	}
	if r := out.Response; r == nil || r.Allowed || r.Result == nil || r.Result.Message != message {
		return fmt.Errorf("answer %+v, want denied with %q", r, message)
	}
	return nil
}

// deleteReview is the AdmissionReview the API server sends for a DELETE
// of obj.
func deleteReview(t *testing.T, obj *unstructured.Unstructured) *admissionv1.AdmissionReview {
	t.Helper()
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.GroupVersionKind()
	kind := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	resource := metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID: types.UID("hostile-" + obj.GetName()), Kind: kind, Resource: resource,
			RequestKind: &kind, RequestResource: &resource,
			Name: obj.GetName(), Namespace: obj.GetNamespace(), Operation: admissionv1.Delete,
			UserInfo:  authenticationv1.UserInfo{Username: "hostile"},
			OldObject: runtime.RawExtension{Raw: raw},
		},
	}
}

// floodConns are the connections of one flood.
type floodSet struct {
	conns []net.Conn
	// refused were closed by the server during their handshake.
	refused int
	// notAccepted did not finish their handshake within dialTimeout.
	notAccepted int
}

// flood opens floodConns TLS connections to lockguard, from the loopback
// addresses from in turn, 64 handshakes at a time, and sends head(i) on
// the i-th.
func flood(t *testing.T, from []string, head func(i int) string) *floodSet {
	t.Helper()
	cfg := target.tls.Clone()
	cfg.ServerName = target.lg.Webhook.Host
	var (
		mu  sync.Mutex
		fs  floodSet
		wg  sync.WaitGroup
		sem = make(chan struct{}, 64)
	)
	start := time.Now()
	for i := range floodConns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			d := &net.Dialer{Timeout: dialTimeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from[i%len(from)])}}
			raw, err := d.Dial("tcp", target.lg.Webhook.Address())
			if err != nil {
				t.Errorf("dialing from %s: %v", from[i%len(from)], err)
				return
			}
			c := tls.Client(raw, cfg)
			_ = c.SetDeadline(time.Now().Add(dialTimeout))
			err = c.Handshake()
			mu.Lock()
			defer mu.Unlock()
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				fs.notAccepted++
				raw.Close()
				return
			case err != nil:
				if fs.refused == 0 {
					t.Logf("a connection from %s closed during its handshake: %v", from[i%len(from)], err)
				}
				fs.refused++
				raw.Close()
				return
			}
			_ = c.SetDeadline(time.Time{})
			_, _ = io.WriteString(c, head(i))
			fs.conns = append(fs.conns, c)
		}()
	}
	wg.Wait()
	t.Logf("flood from %v: %d connections opened, %d refused, %d not accepted, in %s", from, len(fs.conns), fs.refused, fs.notAccepted, time.Since(start).Round(time.Millisecond))
	return &fs
}

// outcomes reads every connection of fs until the server closes it or
// within has passed: answered are the answers of those closed after one,
// refused those closed without, held those still open.
func (fs *floodSet) outcomes(within time.Duration) (answered []string, refused, held int) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	deadline := time.Now().Add(within)
	refused = fs.refused
	for _, c := range fs.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(deadline)
			got, err := io.ReadAll(c)
			mu.Lock()
			defer mu.Unlock()
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				held++
			case len(got) > 0:
				answered = append(answered, string(got))
			default:
				refused++
			}
		}()
	}
	wg.Wait()
	return answered, refused, held
}

// stillOpen counts the connections of fs the server has not closed.
func (fs *floodSet) stillOpen() int {
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		open int
	)
	for _, c := range fs.conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			_, err := c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				mu.Lock()
				open++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return open
}

// close closes every connection of fs.
func (fs *floodSet) close() {
	for _, c := range fs.conns {
		_ = c.Close()
	}
}

// statusCounts counts answers by their status line.
func statusCounts(answers []string) string {
	counts := map[string]int{}
	for _, a := range answers {
		line, _, _ := strings.Cut(a, "\r\n")
		counts[line]++
	}
	var out []string
	for line, n := range counts {
		out = append(out, fmt.Sprintf("%d %q", n, line))
	}
	return strings.Join(out, ", ")
}

// memory says how much memory lockguard holds: its Go heap
// (go_memstats_heap_alloc_bytes, with the garbage not collected yet), its
// goroutines' stacks and its resident set.
func memory(t *testing.T) string {
	t.Helper()
	m, err := target.lg.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", target.lg.Pid()))
	if err != nil {
		t.Fatal(err)
	}
	rss := "?"
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
	}
	return fmt.Sprintf("heap %.1f MiB, stacks %.1f MiB, RSS %s", m["go_memstats_heap_alloc_bytes"]/(1<<20), m["go_memstats_stack_inuse_bytes"]/(1<<20), rss)
}
