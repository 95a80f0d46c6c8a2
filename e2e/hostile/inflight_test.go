//go:build e2e

package hostile

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

// refusedMetric is the series of lockguard's refusals for reason.
func refusedMetric(reason string) string {
	return `lockguard_webhook_requests_refused_total{reason="` + reason + `"}`
}

// closedMetric is the series of the connections closed for reason.
func closedMetric(reason string) string {
	return `lockguard_webhook_connections_closed_total{reason="` + reason + `"}`
}

// counters returns lockguard's refusal and connection-closed counters.
func counters(t *testing.T) map[string]float64 {
	t.Helper()
	m, err := target.lg.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestTrickledReviews: certless clients on 127.0.0.6 and 127.0.0.7 open
// 1,100 connections, each sending the header and the first byte of a
// review body to /validate-delete and stalling, to hold every request
// slot (--webhook-max-in-flight, 512) for the 30 s a body may take; while
// they stall, a review on a new connection from 127.0.0.1 and the API
// server's deletes and Lock create are answered (issue 36, item 1).
func TestTrickledReviews(t *testing.T) {
	checks := prepareChecks(t, "trickle")
	before := counters(t)
	head := "POST " + webhook.Path + " HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(halfBodyLength) + "\r\n\r\n{"
	stalled := flood(t, []string{"127.0.0.6", "127.0.0.7"}, func(int) string { return head })
	defer stalled.close()
	// Every body not held is refused at once: wait for those refusals,
	// so that the stalled ones hold every slot they can.
	refusedAtOnce := func(m map[string]float64) int {
		n := 0.0
		for _, r := range []string{transport.RefusedInFlight, transport.RefusedInFlightPerSource} {
			n += m[refusedMetric(r)] - before[refusedMetric(r)]
		}
		return int(n)
	}
	want := len(stalled.conns) - transport.DefaultMaxInFlight
	for deadline := time.Now().Add(answerWithin); refusedAtOnce(counters(t)) < want; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d stalled bodies refused at once within %s, want %d: they do not hold every slot",
				refusedAtOnce(counters(t)), len(stalled.conns), answerWithin, want)
		}
	}
	open := stalled.stillOpen()
	checks.run(t)
	after := counters(t)
	var deltas []string
	for _, r := range []string{transport.RefusedInFlight, transport.RefusedInFlightPerSource, transport.RefusedCutOff} {
		deltas = append(deltas, fmt.Sprintf("%s %+.0f", r, after[refusedMetric(r)]-before[refusedMetric(r)]))
	}
	for _, r := range []string{transport.ClosedPerSource, transport.ClosedFull, transport.ClosedEvicted} {
		deltas = append(deltas, fmt.Sprintf("connections %s %+.0f", r, after[closedMetric(r)]-before[closedMetric(r)]))
	}
	report(t, "%d connections from 127.0.0.6 and 127.0.0.7 each stalling after the first byte of a review body to %s: %d accepted (%d closed during their handshake, %d not accepted within %s), %d still open once the refused were answered; counters: %s",
		floodConns, webhook.Path, len(stalled.conns), stalled.refused, stalled.notAccepted, dialTimeout, open, strings.Join(deltas, ", "))
}
