package webhook

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// trickle yields its bytes one Read at a time, n bytes each, then EOF.
type trickle struct {
	data []byte
	n    int
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.n)], r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestReadBody: the buffer follows the bytes that arrive, not the length
// the client declares, and every byte it holds comes from the budget.
func TestReadBody(t *testing.T) {
	cases := map[string]struct {
		reason        string
		size          int
		contentLength int64
		budget        int64
		chunk         int
		wantErr       error
		wantCap       int
	}{
		"DeclaredLargeSentSmall": {
			reason: "A client that declares 7,000,000 bytes and sends 10 holds the smallest buffer.",
			size:   10, contentLength: 7_000_000, budget: 1 << 30, chunk: 1, wantCap: minBodyBuffer,
		},
		"GrowsByDoubling": {
			reason: "A 100 KiB body sent in 1000-byte reads ends in the 128 KiB buffer, the bytes intact.",
			size:   100 << 10, contentLength: -1, budget: 1 << 30, chunk: 1000, wantCap: 128 << 10,
		},
		"DeclaredOverLimit": {
			reason: "A Content-Length over MaxReviewSize is refused before reading.",
			size:   10, contentLength: MaxReviewSize + 1, budget: 1 << 30, chunk: 1, wantErr: errTooLarge,
		},
		"StreamedOverLimit": {
			reason: "A body of unknown length over MaxReviewSize is refused once MaxReviewSize+1 bytes arrived.",
			size:   MaxReviewSize + 100, contentLength: -1, budget: 1 << 30, chunk: 1 << 20, wantErr: errTooLarge,
		},
		"OverBudget": {
			reason: "A body whose buffer would not fit the budget is refused.",
			size:   10 << 10, contentLength: 10 << 10, budget: 8 << 10, chunk: 4 << 10, wantErr: errBudget,
		},
		"NoRoomAtAll": {
			reason: "Without room for the smallest buffer, nothing is read.",
			size:   10, contentLength: 10, budget: minBodyBuffer - 1, chunk: 10, wantErr: errBudget,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := bytes.Repeat([]byte("0123456789"), tc.size/10+1)[:tc.size]
			budget := &byteBudget{max: tc.budget}
			b, err := readBody(&trickle{data: data, n: tc.chunk}, tc.contentLength, budget)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("%s\nreadBody(...): error %v, want %v", tc.reason, err, tc.wantErr)
			}
			if err != nil {
				if used := budget.used.Load(); used != 0 {
					t.Errorf("%s\nreadBody(...) failed holding %d bytes of the budget, want 0", tc.reason, used)
				}
				return
			}
			if !bytes.Equal(b.Bytes(), data) {
				t.Errorf("%s\nreadBody(...): %d bytes, not the %d sent", tc.reason, len(b.Bytes()), len(data))
			}
			if got := cap(*b.buf); got != tc.wantCap {
				t.Errorf("%s\nreadBody(...): buffer of %d bytes, want %d", tc.reason, got, tc.wantCap)
			}
			if used := budget.used.Load(); used != int64(tc.wantCap) {
				t.Errorf("%s\nreadBody(...): budget used %d, want the buffer's %d", tc.reason, used, tc.wantCap)
			}
			b.Release()
			if used := budget.used.Load(); used != 0 {
				t.Errorf("%s\nafter Release: budget used %d, want 0", tc.reason, used)
			}
		})
	}
}

// TestMaxInFlight: with MaxInFlight reviews in the handler (one here,
// stalled on its body), the next is answered 429 at once and counted; once
// the first leaves, reviews are served again.
func TestMaxInFlight(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	h := NewHandler(indexOf(t, forgeStack), nil, WithMetrics(m), WithLimits(Limits{MaxInFlight: 1}))
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
	if got := testutil.ToFloat64(m.refused.WithLabelValues(RefusedInFlight)); got != 1 {
		t.Errorf("lockguard_webhook_requests_refused_total{reason=%q} = %v, want 1", RefusedInFlight, got)
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

// TestReviewTimeout: the API server's ?timeout= is believed up to the
// longest timeout an API server gives a webhook.
func TestReviewTimeout(t *testing.T) {
	cases := map[string]struct {
		reason string
		query  string
		want   time.Duration
	}{
		"APIServer":   {reason: "What the API server sends for timeoutSeconds 5.", query: "?timeout=5s", want: 5 * time.Second},
		"Rounded":     {reason: "Less time left than timeoutSeconds, rounded up to a second.", query: "?timeout=2s", want: 2 * time.Second},
		"Missing":     {reason: "No timeout: the longest an API server waits.", query: "", want: MaxReviewTimeout},
		"TooLong":     {reason: "A claim over 30 s is not believed.", query: "?timeout=1h", want: MaxReviewTimeout},
		"Malformed":   {reason: "Not a duration.", query: "?timeout=soon", want: MaxReviewTimeout},
		"NotPositive": {reason: "Zero or negative.", query: "?timeout=-1s", want: MaxReviewTimeout},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, Path+tc.query, nil)
			if got := reviewTimeout(r); got != tc.want {
				t.Errorf("%s\nreviewTimeout(%q) = %s, want %s", tc.reason, tc.query, got, tc.want)
			}
		})
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
	srv := httptest.NewServer(NewHandler(noLookup(t), nil, WithMetrics(m)))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The test's own bound: far above the 1 s under test, below the 30 s
	// a review without ?timeout= gets, so that ignoring it fails.
	_ = conn.SetDeadline(time.Now().Add(MaxReviewTimeout - 10*time.Second))
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
