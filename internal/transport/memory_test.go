package transport

import (
	"context"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// testMemory is a Memory whose runtime figures are *s, sampled once.
func testMemory(s *memSample, bodyFloor int64, connFloor int) *Memory {
	m := &Memory{bodyFloor: bodyFloor, connFloor: connFloor, read: func() memSample { return *s }}
	m.sample()
	return m
}

// TestMemoryBoundsStalledBodies is the attack of issue 38's last item: a
// client that reaches the port stalls bodies on many connections while
// the caches hold most of GOMEMLIMIT. The byte budget alone (64 MiB by
// default) would let it take the heap over the limit; with a Memory the
// bodies hold no more than the room the rest of the process leaves, the
// refusals are counted as "memory", and a review from another address
// (the API server's) is still served, in place of one stalled body.
func TestMemoryBoundsStalledBodies(t *testing.T) {
	// GOMEMLIMIT 256 MiB: the reserve is three eighths; the caches and
	// the runtime hold the rest but 2 MiB and 64 KiB, for the transport.
	const room = 2<<20 + 64<<10
	reserve := int64(256<<20) * reserveEighths / 8
	s := memSample{limit: 256 << 20, live: 256<<20 - reserve - 8<<20 - room, outside: 8 << 20}
	mem := testMemory(&s, 1<<20, DefaultConnectionFloor)
	if got := mem.room.Load(); got != room {
		t.Fatalf("room of %+v: %d bytes, want %d", s, got, room)
	}
	var (
		mu      sync.Mutex
		refused = map[string]int{}
	)
	g := NewGate(Limits{MaxBufferedBytes: DefaultMaxBufferedBytes, Memory: mem}, func(reason string) { mu.Lock(); refused[reason]++; mu.Unlock() })
	addr := testServer(t, ServerOptions{}, func(s *Server) {
		s.Register("/validate-delete", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g.Serve(w, r, MaxReviewSize, func(_ context.Context, body *Body) { _, _ = w.Write(body.Bytes()) })
		}))
	})
	// Each body stalls after 100,000 bytes, in a 128 KiB buffer: sixteen
	// fill the room (the last grows from 64 KiB: 15 x 128 + 64 + 128
	// KiB), the byte budget alone would take 512. One after the other,
	// each held or refused before the next: two growing at once would
	// each hold their old buffer too.
	head := "POST /validate-delete HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: 200000\r\n\r\n" + strings.Repeat("x", 100_000)
	var stalled []net.Conn
	answered := 0
	for i := range 24 {
		c, err := dialFrom("127.0.0.2", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		stalled = append(stalled, c)
		// A body refused is answered and closed before it all arrives:
		// the write may fail.
		_, _ = io.WriteString(c, head)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			mu.Lock()
			answered = refused[RefusedMemory]
			mu.Unlock()
			n, b := gateHeld(g)
			if n+answered == i+1 && (n == 0 || b == int64(n)*(128<<10)) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d stalled bodies: %d held (%d bytes), %d refused after 10 s", i+1, n, b, answered)
			}
		}
	}
	if n, b := gateHeld(g); n != 16 || b > room || answered != len(stalled)-16 {
		t.Fatalf("%d bodies stalled: %d held, %d bytes, %d refused for memory; want 16 held within the room of %d bytes, %d refused",
			len(stalled), n, b, answered, room, len(stalled)-16)
	}
	for _, c := range stalled {
		if got, _ := readAnswer(c, 10*time.Millisecond); got != "" && !strings.Contains(got, refusals[RefusedMemory]) {
			t.Errorf("a stalled body's answer: %q, want 429 %q", got, refusals[RefusedMemory])
		}
	}
	// The review needs 192 KiB as it grows (a kept 64 KiB buffer and a
	// 128 KiB one), more than the room and the kept buffers give: one
	// stalled body is cut off for it.
	review := `{"review":"` + strings.Repeat("r", 80_000) + `"}`
	if status, body := postFrom(t, "127.0.0.1", addr, "/validate-delete", review); status != http.StatusOK || body != review {
		t.Errorf("a review from 127.0.0.1 while 16 bodies from 127.0.0.2 fill the room: HTTP %d %.100q, want 200 and its body echoed", status, body)
	}
	mu.Lock()
	if diff := cmp.Diff(map[string]int{RefusedMemory: len(stalled) - 16, RefusedCutOff: 1}, refused); diff != "" {
		t.Errorf("refusals, -want +got:\n%s", diff)
	}
	mu.Unlock()
	// Once the caches shrink, the room grows back at the next sample.
	s.live = 100 << 20
	mem.sample()
	if got, want := mem.free(), 256<<20-reserve-108<<20+g.budget.used.Load(); got != want {
		t.Errorf("room once the live heap is 100 MiB (the bodies' bytes in it): %d, want %d", got, want)
	}
	if status, _ := postFrom(t, "127.0.0.3", addr, "/validate-delete", strings.Repeat("y", 3<<20)); status != http.StatusOK {
		t.Errorf("a body of 3 MiB once the room grew: HTTP %d, want 200", status)
	}
}

// TestMemoryBodyMax: the bodies' bound under each room.
func TestMemoryBodyMax(t *testing.T) {
	cases := map[string]struct {
		room, bound, want int64
		short             bool
	}{
		"NoLimit":    {room: math.MaxInt64, bound: 64 << 20, want: 64 << 20},
		"RoomOver":   {room: 100 << 20, bound: 64 << 20, want: 64 << 20},
		"RoomUnder":  {room: 20 << 20, bound: 64 << 20, want: 20 << 20, short: true},
		"Floor":      {room: 1 << 20, bound: 64 << 20, want: 16 << 20, short: true},
		"Negative":   {room: -50 << 20, bound: 64 << 20, want: 16 << 20, short: true},
		"FloorOver":  {room: 1 << 20, bound: 8 << 20, want: 8 << 20, short: true},
		"NilUnbound": {bound: 64 << 20, want: 64 << 20},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m := &Memory{bodyFloor: DefaultBodyFloor}
			m.room.Store(tc.room)
			if name == "NilUnbound" {
				m = nil
			}
			got, short := m.bodyMax(tc.bound)
			if got != tc.want || short != tc.short {
				t.Errorf("bodyMax(%d) with room %d: %d, %t; want %d, %t", tc.bound, tc.room, got, short, tc.want, tc.short)
			}
		})
	}
}

// TestMemoryAdmitsConnections: beyond the connection floor, a connection
// is admitted while the room holds one more, counting each admitted since
// the sample; then it is closed as "memory", unless its source holds
// fewer than another by two, which gives up one of its connections.
func TestMemoryAdmitsConnections(t *testing.T) {
	// Room for three and a half connections after the reserve: the two
	// of the floor and one more fit.
	s := memSample{limit: 64 << 20}
	s.live = s.limit - s.limit*reserveEighths/8 - 7*ConnectionCost/2
	mem := testMemory(&s, DefaultBodyFloor, 2)
	var closed []string
	l := fairListen(nil, 100, 100)
	l.mem, l.closed = mem, func(reason string) { closed = append(closed, reason) }
	from := func(ip string) net.Conn { return &fakeConn{addr: &net.TCPAddr{IP: net.ParseIP(ip)}} }
	for i := range 3 {
		if fc, ev := l.admit(from("127.0.0.2")); fc == nil || ev != nil {
			t.Fatalf("connection %d of 127.0.0.2 within the room: admitted %t, evicted %v", i+1, fc != nil, ev)
		}
	}
	if fc, _ := l.admit(from("127.0.0.2")); fc != nil {
		t.Errorf("a fourth connection of 127.0.0.2, past the room: admitted")
	}
	fc, ev := l.admit(from("127.0.0.1"))
	if fc == nil || ev == nil || ev.source != "127.0.0.2" {
		t.Errorf("a first connection of 127.0.0.1 past the room: admitted %t, evicted %v; want admitted in place of one of 127.0.0.2's", fc != nil, ev)
	}
	if diff := cmp.Diff([]string{ClosedMemory, ClosedEvicted}, closed); diff != "" {
		t.Errorf("closed, -want +got:\n%s", diff)
	}
	// The next sample counts the open ones in the live heap, and forgets
	// those admitted since the last.
	s.live -= 10 * ConnectionCost
	mem.sample()
	if fc, _ := l.admit(from("127.0.0.2")); fc == nil {
		t.Errorf("a connection once the live heap is smaller: not admitted")
	}
}

// TestMemorySamplesAfterCollections: a Memory on the real runtime sees a
// heap that grows and shrinks, after the collections that follow.
func TestMemorySamplesAfterCollections(t *testing.T) {
	old := debug.SetMemoryLimit(4 << 30)
	defer debug.SetMemoryLimit(old)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := NewMemory(ctx)
	if got := m.Limit(); got != 4<<30 {
		t.Fatalf("Limit() = %d, want GOMEMLIMIT %d", got, 4<<30)
	}
	// until collects until the room satisfies ok, for 10 s at most.
	until := func(what string, ok func(room int64) bool) int64 {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			runtime.GC()
			time.Sleep(time.Millisecond) // the cleanup runs on its own goroutine
			if room := m.room.Load(); ok(room) {
				return room
			} else if time.Now().After(deadline) {
				t.Fatalf("%s: room still %d bytes after 10 s", what, room)
			}
		}
	}
	// At first, once the garbage of the tests before is gone: two
	// samples in a row within 8 MiB (a -count=3 run sampled one test's
	// leftovers, and the ballast added nothing to them).
	last := int64(math.MaxInt64)
	before := until("at first", func(room int64) bool {
		steady := room < 4<<30-(4<<30)*reserveEighths/8 && room-last < 8<<20 && last-room < 8<<20
		last = room
		return steady
	})
	ballast := make([]byte, 256<<20)
	during := until("with 256 MiB more live", func(room int64) bool { return room <= before-250<<20 })
	runtime.KeepAlive(ballast)
	until("the 256 MiB gone", func(room int64) bool { return room >= during+250<<20 })
}
