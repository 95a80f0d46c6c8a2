package webhook

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/navique/lockguard/internal/transport"
)

// TestMaxInFlight: with MaxInFlight reviews in the handler (one here,
// stalled on its body), the next is answered 429 at once and counted; once
// the first leaves, reviews are served again.
func TestMaxInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(Config{Locks: indexOf(t, forgeStack), Metrics: m, Gate: transport.NewGate(transport.Limits{MaxInFlight: 1}, m.Refused)})
	body := reviewJSON("admission.k8s.io/v1", "forge", "{}")
	post := func(r io.Reader) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, Path, r)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}

	pr, pw := io.Pipe()
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- post(pr) }()
	if _, err := pw.Write([]byte(body[:10])); err != nil { // The handler is reading it.
		t.Fatal(err)
	}
	if rec := post(strings.NewReader(body)); rec.Code != http.StatusTooManyRequests {
		t.Errorf("a review over MaxInFlight: HTTP %d %q, want 429", rec.Code, rec.Body.String())
	}
	// Both come from httptest's one address, whose share of the one
	// slot (at most MaxInFlight) is full.
	if got := testutil.ToFloat64(m.refused.WithLabelValues(RefusedInFlightPerSource)); got != 1 {
		t.Errorf("lockguard_webhook_requests_refused_total{reason=%q} = %v, want 1", RefusedInFlightPerSource, got)
	}
	if _, err := pw.Write([]byte(body[10:])); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	if rec := <-first; rec.Code != http.StatusOK {
		t.Errorf("the review in flight: HTTP %d %q, want 200", rec.Code, rec.Body.String())
	}
	if rec := post(strings.NewReader(body)); rec.Code != http.StatusOK {
		t.Errorf("a review after the one in flight ended: HTTP %d %q, want 200", rec.Code, rec.Body.String())
	}
}

// TestBodyReadDeadline: a review whose body stalls is cut off at the
// timeout the URL carries (?timeout=1s, as the API server sends it): the
// server answers 408 and counts it, rather than holding the connection.
func TestBodyReadDeadline(t *testing.T) {
	m := NewMetrics()
	if err := m.Register(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(NewHandler(Config{Locks: noLookup(t), Metrics: m}))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The test's own bound: far above the 1 s under test, below the 30 s
	// a review without ?timeout= gets, so that ignoring it fails.
	_ = conn.SetDeadline(time.Now().Add(transport.MaxReviewTimeout - 10*time.Second))
	if _, err := io.WriteString(conn, "POST "+Path+"?timeout=1s HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: 7000000\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("a stalled body: HTTP %d, want 408", resp.StatusCode)
	}
	if got := testutil.ToFloat64(m.refused.WithLabelValues(RefusedReadTimeout)); got != 1 {
		t.Errorf("lockguard_webhook_requests_refused_total{reason=%q} = %v, want 1", RefusedReadTimeout, got)
	}
}
