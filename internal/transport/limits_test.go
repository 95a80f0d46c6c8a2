package transport

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"
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
// the client declares, and every byte it holds comes from the budget:
// the buffers it kept for reuse too.
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
			size:   10, contentLength: MaxReviewSize + 1, budget: 1 << 30, chunk: 1, wantErr: ErrTooLarge,
		},
		"StreamedOverLimit": {
			reason: "A body of unknown length over MaxReviewSize is refused once MaxReviewSize+1 bytes arrived.",
			size:   MaxReviewSize + 100, contentLength: -1, budget: 1 << 30, chunk: 1 << 20, wantErr: ErrTooLarge,
		},
		"OverBudget": {
			reason: "A body whose buffer would not fit the budget is refused.",
			size:   10 << 10, contentLength: 10 << 10, budget: 8 << 10, chunk: 4 << 10, wantErr: ErrBudget,
		},
		"NoRoomAtAll": {
			reason: "Without room for the smallest buffer, nothing is read.",
			size:   10, contentLength: 10, budget: minBodyBuffer - 1, chunk: 10, wantErr: ErrBudget,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data := bytes.Repeat([]byte("0123456789"), tc.size/10+1)[:tc.size]
			budget := &byteBudget{max: tc.budget}
			b, err := readBody(&trickle{data: data, n: tc.chunk}, tc.contentLength, MaxReviewSize, budget, nil)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("%s\nreadBody(...): error %v, want %v", tc.reason, err, tc.wantErr)
			}
			if err != nil {
				if used := budget.inUse(); used != 0 {
					t.Errorf("%s\nreadBody(...) failed holding %d bytes of the budget beyond the buffers it keeps, want 0", tc.reason, used)
				}
				return
			}
			if !bytes.Equal(b.Bytes(), data) {
				t.Errorf("%s\nreadBody(...): %d bytes, not the %d sent", tc.reason, len(b.Bytes()), len(data))
			}
			if got := cap(*b.buf); got != tc.wantCap {
				t.Errorf("%s\nreadBody(...): buffer of %d bytes, want %d", tc.reason, got, tc.wantCap)
			}
			if used := budget.inUse(); used != int64(tc.wantCap) {
				t.Errorf("%s\nreadBody(...): budget used %d beyond the buffers it keeps, want the buffer's %d", tc.reason, used, tc.wantCap)
			}
			if used := budget.used.Load(); used > tc.budget {
				t.Errorf("%s\nreadBody(...): budget used %d, over its %d", tc.reason, used, tc.budget)
			}
			b.Release()
			if used := budget.inUse(); used != 0 {
				t.Errorf("%s\nafter Release: budget used %d beyond the buffers it keeps, want 0", tc.reason, used)
			}
		})
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
			r := httptest.NewRequest(http.MethodPost, "/validate-delete"+tc.query, nil)
			if got := ReviewTimeout(r); got != tc.want {
				t.Errorf("%s\nReviewTimeout(%q) = %s, want %s", tc.reason, tc.query, got, tc.want)
			}
		})
	}
}

// FuzzQueryValue: queryValue answers as url.URL.Query().Get, which it
// stands in for, on any query.
func FuzzQueryValue(f *testing.F) {
	for _, q := range []string{"timeout=5s", "", "timeout", "a=b&timeout=2s&timeout=3s", "&&timeout=1s&", "time%6Fut=1s", "timeout=1+s", "a;b=c&timeout=4s", "timeout=%zz", "=x&timeout=="} {
		f.Add(q)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		want, _ := url.ParseQuery(raw)
		if got := queryValue(raw, "timeout"); got != want.Get("timeout") {
			t.Errorf("queryValue(%q) = %q, url.ParseQuery: %q", raw, got, want.Get("timeout"))
		}
	})
}
