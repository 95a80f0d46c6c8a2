package transport

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
)

// Defaults of Memory.
const (
	// DefaultBodyFloor is the byte budget a Memory never takes from the
	// bodies: one review of MaxReviewSize read (its 8 MiB buffer and the
	// 4 MiB one it grew from) and decoded (its copy, charged at the body's
	// length) at a time, and the API server's reviews of a few KiB by the
	// thousand.
	DefaultBodyFloor = 16 << 20
	// DefaultConnectionFloor is how many connections a Memory admits
	// whatever the memory: more than the API servers and the other
	// replicas open, shared among sources as ConnectionLimits says.
	DefaultConnectionFloor = 64
	// ConnectionCost is what a Memory counts for a connection admitted
	// since its last sample: 1,023 connections holding an 8 KiB header
	// each took 45 MiB of heap and 16 MiB of stacks (docs/hostile-clients.md,
	// Slow clients).
	ConnectionCost = 61 << 10
)

// reserveEighths is the share of GOMEMLIMIT, in eighths, the transport
// leaves to the collector: it grows only while the live heap and the
// runtime's other memory are under five eighths of the limit. An eighth
// was not enough: at 100,000 Locks the transport at its bounds filled
// it, the collector spent a third of the CPU, the runtime's memory passed
// the limit and a 256 MiB container was killed (the scale benchmark's
// worst case, 2026-12-07; docs/limits.md, Memory).
const reserveEighths = 3

// Memory makes the webhook server's transport yield to the rest of the
// process under a soft memory limit (GOMEMLIMIT; the chart sets it to 90%
// of the container's limit), as Envoy's overload manager stops accepting
// connections and requests under heap pressure: the Locks and the
// objects lockguard caches come first, and the transport holds only what
// they leave. After each garbage collection it takes what the rest of the
// process holds: the live heap, less the bodies' bytes (which the Gate
// counts), and the runtime's memory outside the heap (goroutine stacks,
// metadata). The room left under the limit, less a reserve for the
// collector (reserveEighths), bounds the bodies' bytes (the
// Gate's MaxBufferedBytes, never under the body floor) and, with the
// bodies' bytes and ConnectionCost for each connection admitted since,
// the connections beyond the connection floor. A review that does not fit
// is answered 429 (RefusedMemory), a connection that does not is closed
// (ClosedMemory): one delete fails closed and is retried, where a heap
// over the limit would have the container killed, and every delete with
// it. Without a limit (GOMEMLIMIT unset) nothing changes.
type Memory struct {
	// bodyFloor and connFloor: DefaultBodyFloor and DefaultConnectionFloor.
	bodyFloor int64
	connFloor int
	// read reads the runtime's figures (readRuntime; a test's stand-in).
	read func() memSample
	// budget is the bytes of the Gate's bodies (NewGate sets it, while
	// the sampling may run).
	budget atomic.Pointer[byteBudget]

	// room is what the transport may hold at the last sample: the limit,
	// less the reserve and the rest of the process; math.MaxInt64 without
	// a limit.
	room atomic.Int64
	// fresh counts the connections admitted since the last sample.
	fresh   atomic.Int64
	stopped atomic.Bool
	// limit is the sample's limit.
	limit atomic.Int64
}

// memSample is what Memory reads of the runtime: the soft memory limit
// (math.MaxInt64: none), the heap live at the last collection, and the
// runtime's memory outside the heap's objects and spans.
type memSample struct{ limit, live, outside int64 }

// NewMemory returns a Memory with the default floors, sampled after each
// garbage collection until ctx ends. Pass it to NewGate (Limits.Memory)
// and NewServer (ConnectionLimits.Memory): both share it.
func NewMemory(ctx context.Context) *Memory {
	m := &Memory{bodyFloor: DefaultBodyFloor, connFloor: DefaultConnectionFloor, read: readRuntime}
	m.room.Store(math.MaxInt64)
	m.sample()
	m.arm()
	context.AfterFunc(ctx, m.Stop)
	return m
}

// Limit returns the soft memory limit the room was last taken under
// (GOMEMLIMIT; math.MaxInt64: none, and the transport yields nothing).
func (m *Memory) Limit() int64 { return m.limit.Load() }

// Stop ends the sampling; the last room stays.
func (m *Memory) Stop() { m.stopped.Store(true) }

// gcSentinel is what arm watches: garbage at once, its cleanup runs after
// the next collection (large enough to get an object of its own: the
// tiny allocator's objects may never be cleaned up).
type gcSentinel struct {
	_ *int
	_ [48]byte
}

// arm samples again after the next garbage collection.
func (m *Memory) arm() {
	runtime.AddCleanup(new(gcSentinel), func(m *Memory) {
		if !m.stopped.Load() {
			m.sample()
			m.arm()
		}
	}, m)
}

// sample takes the room the rest of the process leaves.
func (m *Memory) sample() {
	s := m.read()
	m.limit.Store(s.limit)
	if s.limit == math.MaxInt64 || s.limit <= 0 {
		m.room.Store(math.MaxInt64)
		m.fresh.Store(0)
		return
	}
	rest := s.live + s.outside - m.bodies()
	m.room.Store(s.limit - s.limit*reserveEighths/8 - max(rest, 0))
	m.fresh.Store(0)
}

// bodies is the bytes the Gate's bodies hold (0 before NewGate).
func (m *Memory) bodies() int64 {
	if b := m.budget.Load(); b != nil {
		return b.used.Load()
	}
	return 0
}

// free is the room less the connections admitted since the sample.
func (m *Memory) free() int64 {
	room := m.room.Load()
	if room == math.MaxInt64 {
		return room
	}
	return room - m.fresh.Load()*ConnectionCost
}

// bodyMax is the bodies' bound under max (MaxBufferedBytes): max, or
// less when the rest of the process leaves less room, never under the
// body floor; short reports that the memory bounds it.
func (m *Memory) bodyMax(bound int64) (limit int64, short bool) {
	if m == nil {
		return bound, false
	}
	if free := m.free(); free < bound {
		return max(free, min(m.bodyFloor, bound)), true
	}
	return bound, false
}

// admitConnection reports whether a connection fits beside the open ones
// (open of them): always under the connection floor, otherwise if the
// room holds it with the bodies' bytes. It counts the connection in when
// it does.
func (m *Memory) admitConnection(open int) bool {
	if m == nil {
		return true
	}
	if open >= m.connFloor {
		if free := m.free(); free != math.MaxInt64 && free-m.bodies() < ConnectionCost {
			return false
		}
	}
	m.fresh.Add(1)
	return true
}

// runtimeMetrics are the figures readRuntime reads, in this order.
var runtimeMetrics = []string{
	"/gc/gomemlimit:bytes",
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
}

// readRuntime reads the runtime's figures: what the heap's spans and
// objects do not account for of the memory the runtime holds is outside
// the heap (stacks, metadata, buffers of its own).
func readRuntime() memSample {
	s := make([]metrics.Sample, len(runtimeMetrics))
	for i, name := range runtimeMetrics {
		s[i].Name = name
	}
	metrics.Read(s)
	v := make([]int64, len(s))
	for i := range s {
		if s[i].Value.Kind() == metrics.KindUint64 {
			v[i] = int64(min(s[i].Value.Uint64(), math.MaxInt64))
		}
	}
	return memSample{limit: v[0], live: v[1], outside: v[2] - v[3] - v[4] - v[5] - v[6]}
}
