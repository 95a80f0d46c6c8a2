package transport

import (
	"crypto/tls"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// fairListener accepts every connection at once and decides whom to
// serve, so that no client can keep another waiting in the kernel's
// accept queue: a source address holding perSource connections has its
// next one closed; when max are open, a new connection from a source
// holding fewer than the source holding the most (by two or more), and
// less than an even share of the connections open, takes the place of
// one of that source's, and any other is closed. The API
// servers call from a few addresses: whoever holds the slots from other
// addresses, each API server keeps a share of them (max divided among the
// sources, at most perSource each), and a connection it opens is served
// at once.
type fairListener struct {
	net.Listener
	max, perSource int
	// mem, when not nil, closes connections beyond its floor that the
	// memory left has no room for (Memory.admitConnection).
	mem *Memory
	// closed, when not nil, counts a connection closed by reason
	// (ClosedPerSource, ClosedFull, ClosedMemory, ClosedEvicted).
	closed func(reason string)

	mu      sync.Mutex
	total   int
	sources map[string][]*fairConn // by source address, oldest first
}

// fairListen returns a fairListener of l.
func fairListen(l net.Listener, max, perSource int) *fairListener {
	return &fairListener{Listener: l, max: max, perSource: perSource, sources: map[string][]*fairConn{}}
}

// Accept returns the next connection admitted; it closes those refused.
func (l *fairListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		fc, evicted := l.admit(c)
		if evicted != nil {
			_ = evicted.Conn.Close()
		}
		if fc != nil {
			return fc, nil
		}
		_ = c.Close()
	}
}

// admit counts c in, or returns nil when c must be closed; evicted, when
// not nil, is a connection of the source holding the most, counted out
// already, to close in c's favour.
func (l *fairListener) admit(c net.Conn) (admitted, evicted *fairConn) {
	src := sourceOf(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	mine := len(l.sources[src])
	if mine >= l.perSource {
		l.count(ClosedPerSource)
		return nil, nil
	}
	full, reason := l.total >= l.max, ClosedFull
	if !full && !l.mem.admitConnection(l.total) {
		full, reason = true, ClosedMemory
	}
	if full {
		var most []*fairConn
		for _, conns := range l.sources {
			if len(conns) > len(most) {
				most = conns
			}
		}
		// Taking one from a source with one more than c's would only
		// swap which of the two holds more; and c's source, holding an
		// even share of what is open (or more), is owed none: between
		// sources at their share, evictions would only churn, each a
		// TLS handshake and its buffers (the scale benchmark's worst
		// case: 43 a second where 48, one run each, 2026-12-07).
		sources := len(l.sources)
		if mine == 0 {
			sources++
		}
		if len(most) < mine+2 || mine >= l.total/sources {
			l.count(reason)
			return nil, nil
		}
		evicted = victim(most)
		l.remove(evicted)
		l.count(ClosedEvicted)
	}
	admitted = &fairConn{Conn: c, l: l, source: src}
	l.sources[src] = append(l.sources[src], admitted)
	l.total++
	return admitted, evicted
}

// count counts a connection closed for reason.
func (l *fairListener) count(reason string) {
	if l.closed != nil {
		l.closed(reason)
	}
}

// victim picks the connection of conns to close: the oldest idle one (no
// request on it), else the oldest still in its handshake or first
// header, else the oldest.
func victim(conns []*fairConn) *fairConn {
	for _, want := range []http.ConnState{http.StateIdle, http.StateNew} {
		for _, c := range conns {
			if http.ConnState(c.state.Load()) == want {
				return c
			}
		}
	}
	return conns[0]
}

// remove counts c out; it must be counted in. l.mu is held.
func (l *fairListener) remove(c *fairConn) {
	conns := l.sources[c.source]
	for i, o := range conns {
		if o == c {
			conns = append(conns[:i], conns[i+1:]...)
			break
		}
	}
	if len(conns) == 0 {
		delete(l.sources, c.source)
	} else {
		l.sources[c.source] = conns
	}
	l.total--
	c.out = true
}

// release counts c out when it closes, unless it was evicted.
func (l *fairListener) release(c *fairConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.out {
		l.remove(c)
	}
}

// open returns how many connections are counted in, and from how many
// sources.
func (l *fairListener) open() (conns, sources int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, len(l.sources)
}

// sourceOf is the address c comes from, without its port.
func sourceOf(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// fairConn is a connection a fairListener counts.
type fairConn struct {
	net.Conn
	l      *fairListener
	source string
	// state is its http.ConnState, as the server reports it (trackState).
	state atomic.Int32
	// out is set, under l.mu, once it is no longer counted.
	out  bool
	once sync.Once
	// records bounds its reads by its TLS records (recordBound).
	records recordBound
}

// Read reads no further than the end of the TLS record being read, or at
// a record's start, as far ahead as recordBound lets crypto/tls's buffer
// hold.
func (c *fairConn) Read(p []byte) (int, error) {
	return c.records.read(c.Conn, p)
}

// Close closes the connection and counts it out.
func (c *fairConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c) })
	return err
}

// trackState is an http.Server's ConnState: it keeps each fairConn's
// state, for victim.
func trackState(c net.Conn, st http.ConnState) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if fc, ok := c.(*fairConn); ok {
		fc.state.Store(int32(st))
	}
}
