package framework

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// SettleQuiet is how long lockguard must have written nothing before a
// quiet period is counted: longer than its recheck of unserved kinds (10s)
// and than client-go's wait before it retries an Event (10s), so that a
// write of the settling itself does not land in the quiet period.
const SettleQuiet = 11 * time.Second

// RequestCounter counts the API requests of a client, by method and path,
// as a transport wrapper (ManagerOptions.Wrap): what lockguard itself asks
// of the API server, and nothing the test's own clients do.
type RequestCounter struct {
	mu       sync.Mutex
	requests []Request
}

// Request is one API request a RequestCounter saw.
type Request struct {
	Method string
	// Path is the URL path, e.g.
	// /apis/core.navique.com/v1alpha1/namespaces/forge/stacks/web.
	Path string
}

// String returns "METHOD path".
func (r Request) String() string { return r.Method + " " + r.Path }

// Write reports whether the request changes something: any method but
// GET, HEAD and OPTIONS (watches and lists are GETs).
func (r Request) Write() bool {
	return r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions
}

// InNamespaces reports whether the request is about an object in one of
// namespaces (Events included: they are created in their object's
// namespace).
func (r Request) InNamespaces(namespaces ...string) bool {
	return slices.ContainsFunc(namespaces, func(ns string) bool { return strings.Contains(r.Path+"/", "/namespaces/"+ns+"/") })
}

// NewRequestCounter returns a counter with nothing counted.
func NewRequestCounter() *RequestCounter { return &RequestCounter{} }

// Wrap wraps a client's transport to count its requests.
func (c *RequestCounter) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		c.requests = append(c.requests, Request{Method: req.Method, Path: req.URL.Path})
		c.mu.Unlock()
		return rt.RoundTrip(req)
	})
}

// Mark returns a position in the requests, for Since.
func (c *RequestCounter) Mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.requests)
}

// Since returns the requests counted after mark that match keep.
func (c *RequestCounter) Since(mark int, keep func(Request) bool) []Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Request
	for _, r := range c.requests[mark:] {
		if keep(r) {
			out = append(out, r)
		}
	}
	return out
}

// Summary counts requests by "METHOD path", for a failure message.
func Summary(requests []Request) string {
	counts := map[string]int{}
	for _, r := range requests {
		counts[r.String()]++
	}
	lines := make([]string, 0, len(counts))
	for k, n := range counts {
		lines = append(lines, fmt.Sprintf("%6d %s", n, k))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
