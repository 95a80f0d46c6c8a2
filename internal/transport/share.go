package transport

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// share divides a Gate's in-flight slots and byte budget among source
// addresses, the way fairListener divides connections: a source holding
// perSource requests has its next one refused; when max are in flight, a
// request from a source holding fewer than another (by two or more)
// takes the slot of that source's oldest request whose body is still
// arriving, which is cut off; and a body that finds the byte budget full
// cuts off the request of the source holding the most bytes (more than
// its own source would hold with them), whose body is still arriving.
// The API servers call from a few addresses: whoever trickles bodies from
// other addresses, a review of theirs finds a slot and its bytes. A
// request whose body has arrived is never cut off: its decision runs to
// its end.
type share struct {
	max, perSource int

	mu      sync.Mutex
	total   int
	sources map[string]*source
	// spare is the last source tidy forgot, empty, for of to reuse: a
	// source that sends one review at a time needs no new one (and no
	// new slice of requests) per review.
	spare *source
}

// source is what one source address holds.
type source struct {
	// reqs are its requests counted in, oldest first.
	reqs []*ticket
	// bytes are what its requests' bodies hold of the byte budget,
	// those cut off until they let go.
	bytes int64
}

// ticket is one request a share admitted. Its fields are guarded by the
// share's mu.
type ticket struct {
	s    *share
	addr string
	// deadline is when its body must have arrived.
	deadline time.Time
	// w is its response, whose read deadline cutting it off sets in the
	// past, ending the read of its body at once (only while reading,
	// within the handler). It is not a closure over a ResponseController:
	// that would cost each review two allocations for a rare cut.
	w http.ResponseWriter
	// reading is set until its body was read (or its read failed).
	reading bool
	// out is set once it is no longer counted in (left, or cut off).
	out bool
	// cut is set when it was cut off for another source.
	cut bool
	// cutOff, made only when it waits for bytes (makeRoom), is closed
	// when it is cut off for another source.
	cutOff chan struct{}
	// bytes are what its body holds of the byte budget.
	bytes int64
}

// newShare returns a share of max slots, perSource per source address.
func newShare(max, perSource int) *share {
	return &share{max: max, perSource: min(perSource, max), sources: map[string]*source{}}
}

// requestSource is the address r comes from, without its port: the
// connection's, for every stream of an HTTP/2 connection alike.
func requestSource(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// enter admits a request from addr whose body must arrive by deadline
// (w, its response, ends its read if it is cut off), or returns the
// reason it is refused.
func (s *share) enter(addr string, deadline time.Time, w http.ResponseWriter) (*ticket, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := 0
	if src := s.sources[addr]; src != nil {
		mine = len(src.reqs)
	}
	if mine >= s.perSource {
		return nil, RefusedInFlightPerSource
	}
	if s.total >= s.max {
		v := s.slotVictim(mine)
		if v == nil {
			return nil, RefusedInFlight
		}
		s.cutLocked(v)
	}
	t := &ticket{s: s, addr: addr, deadline: deadline, w: w, reading: true}
	src := s.of(addr)
	src.reqs = append(src.reqs, t)
	s.total++
	return t, ""
}

// slotVictim is the oldest request still reading its body of the source
// holding the most requests with one, if it holds two or more more than
// mine; nil if none.
func (s *share) slotVictim(mine int) *ticket {
	var victim *ticket
	most := mine + 1
	for _, src := range s.sources {
		if len(src.reqs) <= most {
			continue
		}
		for _, t := range src.reqs {
			if t.reading {
				victim, most = t, len(src.reqs)
				break
			}
		}
	}
	return victim
}

// byteVictim is, of the source holding the most bytes (other than t's,
// and more than t's would hold with n more), the request still reading
// its body that holds the most; nil if none.
func (s *share) byteVictim(t *ticket, n int64) *ticket {
	var victim *ticket
	most := s.of(t.addr).bytes + n
	for addr, src := range s.sources {
		if addr == t.addr || src.bytes <= most {
			continue
		}
		var best *ticket
		for _, o := range src.reqs {
			if o.reading && o.bytes > 0 && (best == nil || o.bytes > best.bytes) {
				best = o
			}
		}
		if best != nil {
			victim, most = best, src.bytes
		}
	}
	return victim
}

// of returns addr's source, adding it. s.mu is held.
func (s *share) of(addr string) *source {
	src := s.sources[addr]
	if src == nil {
		src, s.spare = s.spare, nil
		if src == nil {
			src = &source{}
		}
		s.sources[addr] = src
	}
	return src
}

// tidy forgets addr's source once it holds nothing. s.mu is held.
func (s *share) tidy(addr string) {
	if src := s.sources[addr]; src != nil && len(src.reqs) == 0 && src.bytes == 0 {
		delete(s.sources, addr)
		clear(src.reqs[:cap(src.reqs)]) // no ticket kept alive
		src.reqs = src.reqs[:0]
		s.spare = src
	}
}

// countOut counts t out of its source's requests. s.mu is held.
func (s *share) countOut(t *ticket) {
	if t.out {
		return
	}
	t.out = true
	src := s.sources[t.addr]
	for i, o := range src.reqs {
		if o == t {
			src.reqs = append(src.reqs[:i], src.reqs[i+1:]...)
			break
		}
	}
	s.total--
	s.tidy(t.addr)
}

// cutLocked cuts t off: counted out at once, its body's read ended (it
// lets go of its bytes as it returns). s.mu is held.
func (s *share) cutLocked(t *ticket) {
	s.countOut(t)
	t.reading = false
	t.cut = true
	if t.cutOff != nil {
		close(t.cutOff)
	}
	if t.w != nil {
		_ = http.NewResponseController(t.w).SetReadDeadline(time.Unix(1, 0))
	}
}

// doneReading marks t's body as read (or its read as failed): it is no
// longer cut off for another source.
func (t *ticket) doneReading() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.reading = false
}

// leave ends t's request.
func (t *ticket) leave() {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.reading = false
	t.s.countOut(t)
}

// wasCut reports whether t was cut off for another source.
func (t *ticket) wasCut() bool {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.cut
}

// add counts n more bytes (fewer, if negative) held by t's body. A nil
// ticket counts nothing.
func (t *ticket) add(n int64) {
	if t == nil {
		return
	}
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	t.bytes += n
	t.s.of(t.addr).bytes += n
	t.s.tidy(t.addr)
}

// makeRoom cuts off, when b has no room for n more bytes, the request
// byteVictim picks, and waits until b is given bytes back (or a second
// has passed, or t's deadline, or t is cut off itself). It reports
// whether to try b again: false when no request may be cut off for t.
func (t *ticket) makeRoom(b *byteBudget, n int64) bool {
	if t == nil || b == nil {
		return false
	}
	freed := b.freedSignal()
	t.s.mu.Lock()
	v := t.s.byteVictim(t, n)
	if v != nil && !t.out {
		t.s.cutLocked(v)
	}
	if v == nil || t.cut {
		t.s.mu.Unlock()
		return false
	}
	if t.cutOff == nil {
		t.cutOff = make(chan struct{}) // closed by cutLocked
	}
	cutOff := t.cutOff
	t.s.mu.Unlock()
	wait := time.NewTimer(min(time.Second, time.Until(t.deadline)))
	defer wait.Stop()
	select {
	case <-freed:
		return true
	case <-wait.C:
		return time.Now().Before(t.deadline)
	case <-cutOff:
		return false
	}
}
