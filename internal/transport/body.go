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
// the first one over MaxReviewSize, each with a pool: a review's body is
// read into a buffer that doubles only when the bytes that arrived fill it,
// so a client that declares megabytes and sends one byte holds
// minBodyBuffer, never what it declared.
const (
	minBodyShift  = 12 // 4 KiB
	minBodyBuffer = 1 << minBodyShift
)

// bodyClasses is the number of size classes: up to 8 MiB, the first power
// of two over MaxReviewSize+1 (the extra byte tells a body over the limit).
var bodyClasses = bits.Len(uint(MaxReviewSize)) - minBodyShift + 1

var bodyPools = make([]sync.Pool, bodyClasses)

// getBuffer returns a buffer of size class c (length minBodyBuffer<<c).
func getBuffer(c int) *[]byte {
	if b, ok := bodyPools[c].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, minBodyBuffer<<c)
	return &b
}

// putBuffer returns b, of size class c, to its pool.
func putBuffer(c int, b *[]byte) { bodyPools[c].Put(b) }

// ErrTooLarge is wrapped by the error of a body over its limit.
var ErrTooLarge = errors.New("request entity is too large")

// tooLarge is the error of a body over limit bytes.
func tooLarge(limit int64) error { return fmt.Errorf("%w; limit is %d bytes", ErrTooLarge, limit) }

// ErrBudget is returned by ReadBody when the buffers of the reviews in
// flight would exceed the server's budget.
var ErrBudget = errors.New("too many review bytes in flight; retry later")

// byteBudget bounds the bytes of body buffers held at once by the reviews
// in flight. The zero value has no room; a nil *byteBudget is unbounded.
type byteBudget struct {
	max  int64
	used atomic.Int64
}

// take reserves n bytes, or reports that they would exceed the budget.
func (b *byteBudget) take(n int64) bool {
	if b == nil {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

// give returns n bytes to the budget.
func (b *byteBudget) give(n int64) {
	if b != nil {
		b.used.Add(-n)
	}
}

// Body is a request's body in a pooled buffer: Bytes until Release.
type Body struct {
	buf    *[]byte
	class  int
	n      int
	budget *byteBudget
}

// Bytes returns the body; it is valid until Release.
func (b *Body) Bytes() []byte { return (*b.buf)[:b.n] }

// Release returns the buffer to its pool and its bytes to the budget.
func (b *Body) Release() {
	if b.buf == nil {
		return
	}
	putBuffer(b.class, b.buf)
	b.budget.give(int64(minBodyBuffer) << b.class)
	b.buf = nil
}

// readBody reads a request body of at most limit (at most MaxReviewSize)
// bytes into a pooled buffer that grows (doubling) only as bytes arrive,
// whatever length the client declares: a Content-Length over limit is
// refused at once, one under it is only a claim. Each buffer it holds is
// taken from budget first; when budget has no room it returns ErrBudget.
// The caller must Release the body.
func readBody(r io.Reader, contentLength, limit int64, budget *byteBudget) (*Body, error) {
	limit = min(limit, MaxReviewSize)
	if contentLength > limit {
		return nil, tooLarge(limit)
	}
	if !budget.take(minBodyBuffer) {
		return nil, ErrBudget
	}
	b := &Body{buf: getBuffer(0), budget: budget}
	r = io.LimitReader(r, limit+1)
	for {
		buf := *b.buf
		if b.n == len(buf) {
			if b.class+1 == bodyClasses {
				b.Release()
				return nil, tooLarge(limit)
			}
			size := int64(len(buf)) * 2
			if !budget.take(size) {
				b.Release()
				return nil, ErrBudget
			}
			next := getBuffer(b.class + 1)
			copy(*next, buf)
			putBuffer(b.class, b.buf)
			budget.give(int64(len(buf)))
			b.buf, b.class = next, b.class+1
			buf = *next
		}
		n, err := r.Read(buf[b.n:])
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
