package transport

import (
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeConn is a connection from addr that records whether it was closed.
type fakeConn struct {
	net.Conn
	addr   *net.TCPAddr
	closed bool
}

func (c *fakeConn) RemoteAddr() net.Addr { return c.addr }
func (c *fakeConn) Close() error         { c.closed = true; return nil }

// TestFairListenerAdmit: which connection a full fairListener serves, and
// whose it closes in its favour.
func TestFairListenerAdmit(t *testing.T) {
	cases := map[string]struct {
		reason  string
		held    map[string]int // connections open, by source
		idle    string         // a source whose second connection is idle
		from    string
		want    bool
		evicted string // the source of the connection closed, if any
		evictAt int    // its index among that source's connections
		closed  string // the reason counted (ServerOptions.Closed), if any
	}{
		"Room":             {reason: "Under both caps: served.", held: map[string]int{"127.0.0.2": 2}, from: "127.0.0.1", want: true},
		"PerSource":        {reason: "A source at its cap: closed.", held: map[string]int{"127.0.0.2": 3}, from: "127.0.0.2", closed: ClosedPerSource},
		"FullTakesFromTop": {reason: "Full: a source holding none takes the oldest of the source holding the most.", held: map[string]int{"127.0.0.2": 3, "127.0.0.3": 2}, from: "127.0.0.1", want: true, evicted: "127.0.0.2", closed: ClosedEvicted},
		"FullIdleFirst":    {reason: "Full: an idle connection goes before older busy ones.", held: map[string]int{"127.0.0.2": 3, "127.0.0.3": 2}, idle: "127.0.0.2", from: "127.0.0.1", want: true, evicted: "127.0.0.2", evictAt: 1, closed: ClosedEvicted},
		"FullNoSwap":       {reason: "Full: a source holding one less than the most is closed, or the two would swap.", held: map[string]int{"127.0.0.2": 3, "127.0.0.3": 2}, from: "127.0.0.3", closed: ClosedFull},
		"FullEven":         {reason: "Full and even: closed.", held: map[string]int{"127.0.0.2": 2, "127.0.0.3": 2, "127.0.0.4": 1}, from: "127.0.0.4", closed: ClosedFull},
		"FullAtShare":      {reason: "Full: a source holding its even share takes no other's, however many the most holds.", held: map[string]int{"127.0.0.2": 3, "127.0.0.3": 1, "127.0.0.4": 1}, from: "127.0.0.3", closed: ClosedFull},
		"FullUnderShare":   {reason: "Full: a source under its even share takes one of the most's.", held: map[string]int{"127.0.0.2": 3, "127.0.0.3": 2}, from: "127.0.0.4", want: true, evicted: "127.0.0.2", closed: ClosedEvicted},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := fairListen(nil, 5, 3)
			bySource := map[string][]*fairConn{}
			for src, n := range tc.held {
				for range n {
					fc, ev := l.admit(&fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(src)}})
					if fc == nil || ev != nil {
						t.Fatalf("setting up %v: a connection from %s not admitted", tc.held, src)
					}
					bySource[src] = append(bySource[src], fc)
				}
			}
			if tc.idle != "" {
				bySource[tc.idle][1].state.Store(int32(http.StateIdle))
				for _, c := range bySource[tc.idle][2:] {
					c.state.Store(int32(http.StateActive))
				}
				bySource[tc.idle][0].state.Store(int32(http.StateActive))
			}
			var closed []string
			l.closed = func(reason string) { closed = append(closed, reason) }
			fc, ev := l.admit(&fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(tc.from)}})
			var wantClosed []string
			if tc.closed != "" {
				wantClosed = []string{tc.closed}
			}
			if diff := cmp.Diff(wantClosed, closed); diff != "" {
				t.Errorf("%s\nadmit(from %s) with %v open: reasons counted -want +got:\n%s", tc.reason, tc.from, tc.held, diff)
			}
			if got := fc != nil; got != tc.want {
				t.Errorf("%s\nadmit(from %s) with %v open: served %t, want %t", tc.reason, tc.from, tc.held, got, tc.want)
			}
			var want *fairConn
			if tc.evicted != "" {
				want = bySource[tc.evicted][tc.evictAt]
			}
			if ev != want {
				t.Errorf("%s\nadmit(from %s) with %v open: evicted %v, want %s's #%d", tc.reason, tc.from, tc.held, ev, tc.evicted, tc.evictAt)
			}
			total, _ := l.open()
			wantTotal := 0
			for _, n := range tc.held {
				wantTotal += n
			}
			if fc != nil {
				wantTotal++
			}
			if ev != nil {
				wantTotal--
			}
			if total != wantTotal {
				t.Errorf("%s\nafter admit: %d connections counted, want %d", tc.reason, total, wantTotal)
			}
			// Closing every connection counts every one out, the evicted
			// one (counted out already) too.
			for _, conns := range bySource {
				for _, c := range conns {
					_ = c.Close()
				}
			}
			if fc != nil {
				_ = fc.Close()
			}
			n, sources := l.open()
			if diff := cmp.Diff(fmt.Sprint(0, 0), fmt.Sprint(n, sources)); diff != "" {
				t.Errorf("%s\nafter closing everything, connections and sources: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
