// Package transport is how lockguard reads what clients send to its
// webhook server, on every path: the admission reviews of the API server
// (deletes, Lock creates) and the calls of the other replicas. One Gate
// bounds them all together: reviews and calls in flight, the bytes their
// bodies hold (each buffer growing with the bytes that arrive, never with
// what a client declares), and how long a body may take (the review's own
// timeout); the requests in flight and the bytes are shared among source
// addresses (share), so that no client holds them from the API server.
// Server bounds what comes before a handler: connections (in
// all, and fairly shared among source addresses), header bytes and time,
// and closes the connection of any request answered before its body was
// read.
package transport

import (
	"net/http"
	"net/url"
	"strings"
	"time"
)

// MaxReviewSize bounds the body of an AdmissionReview, as in
// controller-runtime: two objects of at most 3 MiB each, plus 1 MiB. No
// body on any path is read beyond it.
const MaxReviewSize = 7 << 20

// Defaults of Limits.
const (
	// DefaultMaxInFlight is the default of Limits.MaxInFlight: more than
	// the mutating requests a fleet of three API servers serves at once by
	// default (--max-mutating-requests-inflight 200 each), so that the
	// API server alone never meets it.
	DefaultMaxInFlight = 512
	// DefaultMaxInFlightPerSource is the default of
	// Limits.MaxInFlightPerSource: half of DefaultMaxInFlight, more than
	// one API server serves at once by default (200).
	DefaultMaxInFlightPerSource = DefaultMaxInFlight / 2
	// DefaultMaxBufferedBytes is the default of Limits.MaxBufferedBytes:
	// room for eight reviews of MaxReviewSize at once, a quarter of the
	// chart's 256 MiB memory limit.
	DefaultMaxBufferedBytes = 64 << 20
	// MaxReviewTimeout is the longest timeout an API server gives a
	// webhook call (timeoutSeconds is at most 30), and the body's read
	// deadline of a review whose URL has no ?timeout=.
	MaxReviewTimeout = 30 * time.Second
)

// Limits bound what the clients of the webhook server can make lockguard
// hold, on every path together. The API server sends reviews of a few kilobytes and waits at most
// timeoutSeconds for each; anything beyond that is a client to refuse.
type Limits struct {
	// MaxInFlight is how many reviews are served at once; one more is
	// answered 429 at once, before its body is read. Default
	// DefaultMaxInFlight.
	MaxInFlight int
	// MaxInFlightPerSource is how many of them one source address may
	// have served at once; one more is answered 429 at once. When
	// MaxInFlight are served, a request from an address holding fewer (by
	// two or more) than another is served in place of that address's
	// oldest request whose body is still arriving, which is answered 429.
	// Default DefaultMaxInFlightPerSource, at most MaxInFlight.
	MaxInFlightPerSource int
	// MaxBufferedBytes bounds the bytes of the body buffers of all the
	// reviews in flight, at their capacity, with the buffers kept for
	// reuse and what decoding a review copies out of its body (until its
	// answer is written); a review whose body does not fit is answered
	// 429. Each buffer grows with the bytes that arrived, never with what
	// the client declares. When a body does not fit, the request of the
	// source address holding the most bytes (more than the body's would
	// hold with it) whose body is still arriving is answered 429 to make
	// room. Default DefaultMaxBufferedBytes.
	MaxBufferedBytes int64
	// Memory, when not nil, lowers MaxBufferedBytes to what the rest of
	// the process leaves under GOMEMLIMIT (never under its body floor); a
	// review that does not fit then is refused as RefusedMemory. Share it
	// with the Server's ConnectionLimits.Memory; one Gate per Memory.
	Memory *Memory
}

// Reasons a Gate refuses a request before its handler decides, as
// Gate.Refused reports them (lockguard_webhook_requests_refused_total).
const (
	RefusedInFlight          = "in_flight"
	RefusedInFlightPerSource = "in_flight_per_source"
	RefusedBufferedBytes     = "buffered_bytes"
	RefusedReadTimeout       = "read_timeout"
	// RefusedMemory is a request whose body did not fit the bytes the
	// rest of the process leaves under GOMEMLIMIT (Limits.Memory).
	RefusedMemory = "memory"
	// RefusedCutOff is a request whose body was still arriving, cut off
	// for a source address holding fewer requests or bytes.
	RefusedCutOff = "cut_off"
)

// Gate admits requests within Limits, shared by every path of the webhook
// server.
type Gate struct {
	share  *share
	budget *byteBudget
	// refused, when set, counts a refusal by reason.
	refused func(reason string)
}

// NewGate returns a Gate of l; zero fields take their defaults. refused,
// when not nil, is told the reason of each refusal.
func NewGate(l Limits, refused func(reason string)) *Gate {
	if l.MaxInFlight <= 0 {
		l.MaxInFlight = DefaultMaxInFlight
	}
	if l.MaxInFlightPerSource <= 0 {
		l.MaxInFlightPerSource = DefaultMaxInFlightPerSource
	}
	if l.MaxBufferedBytes <= 0 {
		l.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	budget := &byteBudget{max: l.MaxBufferedBytes, mem: l.Memory}
	if l.Memory != nil {
		l.Memory.budget.Store(budget)
	}
	return &Gate{share: newShare(l.MaxInFlight, l.MaxInFlightPerSource), budget: budget, refused: refused}
}

// refuseBytes answers a request whose bytes the budget refused, 429, and
// counts it: RefusedMemory when the memory bounded the budget, else
// RefusedBufferedBytes.
func (g *Gate) refuseBytes(w http.ResponseWriter) {
	reason, msg := RefusedBufferedBytes, ErrBudget.Error()
	if g.budget.short() {
		reason, msg = RefusedMemory, refusals[RefusedMemory]
	}
	g.refuse(reason)
	http.Error(w, msg, http.StatusTooManyRequests)
}

// refuse counts a refusal for reason.
func (g *Gate) refuse(reason string) {
	if g.refused != nil {
		g.refused(reason)
	}
}

// ReviewTimeout is how long the API server waits for the answer to r: the
// ?timeout= it puts on the URL of every webhook call (the webhook's
// timeoutSeconds, or less when the request it admits has less time left,
// rounded up to a second; k8s.io/apiserver's webhook dispatchers, since
// Kubernetes 1.14). A missing, malformed or larger value is
// MaxReviewTimeout: the value is a client's claim, and no API server waits
// longer.
func ReviewTimeout(r *http.Request) time.Duration {
	s := queryValue(r.URL.RawQuery, "timeout")
	if s == "" {
		return MaxReviewTimeout
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 || d > MaxReviewTimeout {
		return MaxReviewTimeout
	}
	return d
}

// DecisionMargin is how much of a review's timeout is kept for answering:
// the decision (and the read of the API server that confirms an allowed
// delete) must end that much before the API server stops waiting, so that
// the answer, even an error, arrives in time. A quarter of the timeout,
// between 250 ms and 2 s (5 s reviews: the read has 3.75 s).
func DecisionMargin(timeout time.Duration) time.Duration {
	return min(max(timeout/4, 250*time.Millisecond), 2*time.Second)
}

// queryValue returns url.ParseQuery(raw).Get(key) without parsing the
// whole query into a map (a review's URL has one member, its timeout)
// when raw is plain: no percent sign, plus sign or semicolon, which
// ParseQuery decodes or drops; such a query is parsed by ParseQuery.
func queryValue(raw, key string) string {
	if strings.ContainsAny(raw, "%+;") {
		v, _ := url.ParseQuery(raw)
		return v.Get(key)
	}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if k, v, _ := strings.Cut(pair, "="); k == key {
			return v
		}
	}
	return ""
}
