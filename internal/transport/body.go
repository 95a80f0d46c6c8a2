package transport

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
	"sync/atomic"
)

// Body buffers come in size classes, powers of two from minBodyBuffer to
// the first one over MaxReviewSize: a review's body is read into a buffer
// that doubles only when the bytes that arrived fill it, so a client that
// declares megabytes and sends one byte holds minBodyBuffer, never what it
// declared. A buffer a body no longer needs is kept for the next body of
// its class, and stays charged to the budget while kept.
const (
	minBodyShift  = 12 // 4 KiB
	minBodyBuffer = 1 << minBodyShift
)

// bodyClasses is the number of size classes: up to 8 MiB, the first power
// of two over MaxReviewSize+1 (the extra byte tells a body over the limit).
var bodyClasses = bits.Len(uint(MaxReviewSize)) - minBodyShift + 1

// classSize is the capacity of the buffers of size class c.
func classSize(c int) int64 { return int64(minBodyBuffer) << c }

// ErrTooLarge is wrapped by the error of a body over its limit.
var ErrTooLarge = errors.New("request entity is too large")

// tooLarge is the error of a body over limit bytes.
func tooLarge(limit int64) error { return fmt.Errorf("%w; limit is %d bytes", ErrTooLarge, limit) }

// ErrBudget is returned by ReadBody when the buffers of the reviews in
// flight would exceed the server's budget.
var ErrBudget = errors.New("too many review bytes in flight; retry later")

// byteBudget bounds the memory of request bodies: the capacity of every
// buffer, in use or kept for reuse, and what decoding a body copies out of
// it while its request is served. The zero value has no room; a nil
// *byteBudget is unbounded and keeps no buffers.
type byteBudget struct {
	max  int64
	used atomic.Int64
	// mem, when not nil, lowers max to what the rest of the process
	// leaves (Memory.bodyMax).
	mem *Memory

	mu sync.Mutex
	// kept are the buffers kept for reuse, by size class; keptBytes
	// their capacity (counted in used).
	kept      [][]*[]byte
	keptBytes int64
	// freed, when not nil, is closed when bytes are given back or a
	// buffer is kept (freedSignal).
	freed chan struct{}
}

// take reserves n bytes, letting go of kept buffers (largest first) if
// that makes room (letGo), or reports that they would exceed the budget.
func (b *byteBudget) take(n int64) bool { return b.reserve(n, true) }

// reserve reserves n bytes, letting go of kept buffers for room only when
// letGo is set, or reports that they would exceed the budget.
func (b *byteBudget) reserve(n int64, letGo bool) bool {
	if b == nil {
		return true
	}
	for {
		used := b.used.Load()
		if bound, _ := b.mem.bodyMax(b.max); used+n > bound {
			if letGo && b.letGo(n, bound) {
				continue
			}
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// short reports whether the memory bounds the budget under its max now:
// the reason of a refusal (RefusedMemory rather than
// RefusedBufferedBytes).
func (b *byteBudget) short() bool {
	if b == nil {
		return false
	}
	_, short := b.mem.bodyMax(b.max)
	return short
}

// letGo gives up the largest kept buffer, and reports whether it had
// one, when letting go of every kept buffer would make room for n bytes
// under bound; otherwise it keeps them all (a body that cannot fit
// whatever is let go would only turn them into garbage).
func (b *byteBudget) letGo(n, bound int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used.Load()-b.keptBytes+n > bound {
		return false
	}
	for c := len(b.kept) - 1; c >= 0; c-- {
		if n := len(b.kept[c]); n > 0 {
			b.kept[c][n-1] = nil
			b.kept[c] = b.kept[c][:n-1]
			b.keptBytes -= classSize(c)
			b.used.Add(-classSize(c))
			return true
		}
	}
	return false
}

// give returns n bytes to the budget.
func (b *byteBudget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
		b.mu.Lock()
		b.signal()
		b.mu.Unlock()
	}
}

// freedSignal returns a channel closed the next time bytes are given back
// or a buffer is kept for reuse (and can be let go).
func (b *byteBudget) freedSignal() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

// signal closes freed. b.mu is held.
func (b *byteBudget) signal() {
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// get returns a buffer of size class c or larger, charged, and its
// class: a kept one of class c; otherwise a new one, if the budget has
// room for it beside the kept buffers; otherwise the smallest kept one
// of a larger class; otherwise a new one, once kept buffers are let go
// for its room. A short budget thus reuses the buffers it keeps rather
// than letting them go to make new ones: under GOMEMLIMIT (Memory), a
// client that grows bodies to megabytes on many connections made the
// collector's garbage (200 MB a second, the scale benchmark's worst
// case, 2026-12-07 13:40) faster than it could collect.
func (b *byteBudget) get(c int) (*[]byte, int, bool) {
	if b != nil {
		if buf, k := b.reuse(c, c); buf != nil {
			return buf, k, true
		}
		if !b.reserve(classSize(c), false) {
			if buf, k := b.reuse(c+1, bodyClasses-1); buf != nil {
				return buf, k, true
			}
			if !b.take(classSize(c)) {
				return nil, 0, false
			}
		}
	}
	buf := make([]byte, classSize(c))
	return &buf, c, true
}

// reuse returns a kept buffer of the smallest class from c to last that
// has one, and its class; nil if none has.
func (b *byteBudget) reuse(c, last int) (*[]byte, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := c; k <= last && k < len(b.kept); k++ {
		if n := len(b.kept[k]); n > 0 {
			buf := b.kept[k][n-1]
			b.kept[k][n-1] = nil
			b.kept[k] = b.kept[k][:n-1]
			b.keptBytes -= classSize(k)
			return buf, k
		}
	}
	return nil, 0
}

// put keeps buf, of size class c, for reuse, still charged.
func (b *byteBudget) put(c int, buf *[]byte) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.kept == nil {
		b.kept = make([][]*[]byte, bodyClasses)
	}
	b.kept[c] = append(b.kept[c], buf)
	b.keptBytes += classSize(c)
	b.signal()
}

// inUse is what the budget counts beyond the buffers it keeps.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used.Load() - b.keptBytes
}

// Body is a request's body in a buffer charged to the budget: Bytes until
// Release (or dropBuffer). What it holds is counted to its request's
// source address too (t), when it has one.
type Body struct {
	buf    *[]byte
	class  int
	n      int
	budget *byteBudget
	t      *ticket
	// decoded is what charge reserved, returned by Release.
	decoded int64
}

// Bytes returns the body; it is valid until Release.
func (b *Body) Bytes() []byte { return (*b.buf)[:b.n] }

// charge reserves n more bytes of the budget until Release, for what
// decoding the body copies out of it; it reports whether they fit (after
// cutting off other sources' bodies, makeRoom).
func (b *Body) charge(n int64) bool {
	for !b.budget.take(n) {
		if !b.t.makeRoom(b.budget, n) {
			return false
		}
	}
	b.t.add(n)
	b.decoded += n
	return true
}

// get returns a buffer of size class c or larger, charged, and its
// class (byteBudget.get), after cutting off other sources' bodies if that
// makes room (makeRoom).
func (b *Body) get(c int) (*[]byte, int, bool) {
	for {
		if buf, k, ok := b.budget.get(c); ok {
			b.t.add(classSize(k))
			return buf, k, true
		}
		if !b.t.makeRoom(b.budget, classSize(c)) {
			return nil, 0, false
		}
	}
}

// keep gives up buf, of size class c, to the budget's kept buffers.
func (b *Body) keep(c int, buf *[]byte) {
	b.budget.put(c, buf)
	b.t.add(-classSize(c))
}

// dropBuffer gives up the buffer (Bytes is then invalid), keeping what
// charge reserved until Release.
func (b *Body) dropBuffer() {
	if b.buf == nil {
		return
	}
	b.keep(b.class, b.buf)
	b.buf = nil
}

// Release gives up the buffer and returns what charge reserved.
func (b *Body) Release() {
	b.dropBuffer()
	b.budget.give(b.decoded)
	b.t.add(-b.decoded)
	b.decoded = 0
}

// readBody reads a request body of at most limit (at most MaxReviewSize)
// bytes into a pooled buffer that grows (doubling) only as bytes arrive,
// whatever length the client declares: a Content-Length over limit is
// refused at once, one under it is only a claim. Each buffer it holds is
// charged to budget first (a kept one is already); when budget has no
// room it returns ErrBudget. What the body holds is counted to t's source
// (when t is not nil), which may cut off other sources' bodies for room.
// The caller must Release the body.
func readBody(r io.Reader, contentLength, limit int64, budget *byteBudget, t *ticket) (*Body, error) {
	limit = min(limit, MaxReviewSize)
	if contentLength > limit {
		return nil, tooLarge(limit)
	}
	b := &Body{budget: budget, t: t}
	first, class, ok := b.get(0)
	if !ok {
		return nil, ErrBudget
	}
	b.buf, b.class = first, class
	// A LimitedReader of its own, on the stack (io.LimitReader's is not).
	lr := io.LimitedReader{R: r, N: limit + 1}
	for {
		buf := *b.buf
		if b.n == len(buf) {
			if b.class+1 == bodyClasses {
				b.Release()
				return nil, tooLarge(limit)
			}
			next, class, ok := b.get(b.class + 1)
			if !ok {
				b.Release()
				return nil, ErrBudget
			}
			copy(*next, buf)
			b.keep(b.class, b.buf)
			b.buf, b.class = next, class
			buf = *next
		}
		n, err := lr.Read(buf[b.n:])
		b.n += n
		if int64(b.n) > limit {
			b.Release()
			return nil, tooLarge(limit)
		}
		if errors.Is(err, io.EOF) {
			return b, nil
		}
		if err != nil {
			b.Release()
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
	}
}
