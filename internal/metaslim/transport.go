package metaslim

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Bounds of what a Transport reads before it slims. A larger frame or
// answer goes through as it came: the API server's objects are at most
// 1.5 MiB in etcd, and a page of lockguard's lists is a few hundred of
// them.
const (
	// MaxFrame is the largest watch event slimmed.
	MaxFrame = 4 << 20
	// MaxBody is the largest list (or get) answer slimmed.
	MaxBody = 64 << 20
	// keepBuffer is the largest buffer a watch keeps between its events.
	keepBuffer = 64 << 10
	// poolBuffer is the largest buffer of a whole answer kept for the
	// next (a page of a list is well under it).
	poolBuffer = 4 << 20
)

// The media types a Transport slims: the metadata client's request for
// PartialObjectMetadata (a watch or get) or PartialObjectMetadataList, in
// protobuf first (client-go's metadata package), answered in protobuf.
const (
	acceptPartial  = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata"
	answerProtobuf = "application/vnd.kubernetes.protobuf"
)

// Transport is an http.RoundTripper that slims the API server's protobuf
// answers to metadata-only lists, gets and watches (see the package
// comment), and passes every other request and answer through Base as it
// is. Give it to the cache's HTTP client only: whatever reads through it
// sees no managedFields.
type Transport struct {
	Base http.RoundTripper
}

// Wrap returns c with its transport wrapped in a Transport (a copy; c is
// not changed).
func Wrap(c *http.Client) *http.Client {
	w := *c
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	w.Transport = &Transport{Base: base}
	return &w
}

// RoundTrip sends req through Base, slimming its answer when it is a
// metadata-only read answered in protobuf.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.Base.RoundTrip(req)
	if err != nil || !slims(req, resp) {
		return resp, err
	}
	if watching(req) {
		resp.Body = &watchBody{src: resp.Body}
		return resp, nil
	}
	return slimWhole(resp)
}

// slims reports whether the answer resp to req is one a Transport slims.
func slims(req *http.Request, resp *http.Response) bool {
	return req.Method == http.MethodGet && resp.StatusCode == http.StatusOK &&
		strings.HasPrefix(req.Header.Get("Accept"), acceptPartial) &&
		strings.HasPrefix(resp.Header.Get("Content-Type"), answerProtobuf)
}

// watching reports whether req asks for a watch.
func watching(req *http.Request) bool {
	w, err := strconv.ParseBool(req.URL.Query().Get("watch"))
	return err == nil && w
}

// buffers are the bytes of whole answers, read and slimmed.
var buffers = sync.Pool{New: func() any { return new([]byte) }}

// slimWhole reads resp's body (up to MaxBody) and answers with it
// slimmed: a list's items or a get's object; as it came if it cannot be.
func slimWhole(resp *http.Response) (*http.Response, error) {
	in := buffers.Get().(*[]byte)
	if n := resp.ContentLength; n > 0 && n <= MaxBody {
		// A claim, but bounded.
		*in = slices.Grow((*in)[:0], int(n)+1)
	}
	read, err := readUpTo((*in)[:0], resp.Body, MaxBody)
	*in = read
	if err != nil || len(read) > MaxBody {
		// Too large, or cut short: the rest as it comes (an error reads
		// as client-go would have read it).
		resp.Body = &prefixed{reader: io.MultiReader(bytes.NewReader(read), errorOr(resp.Body, err)), close: resp.Body.Close, buf: in}
		return resp, nil
	}
	_ = resp.Body.Close()
	out := buffers.Get().(*[]byte)
	slim, ok := appendObject((*out)[:0], read)
	*out = slim
	if !ok {
		pool(out)
		out, slim = in, read
	} else {
		pool(in)
	}
	resp.Body = &prefixed{reader: bytes.NewReader(slim), buf: out}
	resp.ContentLength = int64(len(slim))
	if resp.Header.Get("Content-Length") != "" {
		resp.Header.Set("Content-Length", strconv.Itoa(len(slim)))
	}
	return resp, nil
}

// pool keeps buf for the next answer, unless it is larger than
// poolBuffer.
func pool(buf *[]byte) {
	if cap(*buf) <= poolBuffer {
		buffers.Put(buf)
	}
}

// errorOr returns a reader of r, or of err if there is one.
func errorOr(r io.Reader, err error) io.Reader {
	if err != nil {
		return &errReader{err}
	}
	return r
}

// errReader returns err.
type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

// readUpTo appends r's bytes to buf until it ends or buf holds more than
// limit (one byte more: then it stops).
func readUpTo(buf []byte, r io.Reader, limit int) ([]byte, error) {
	b := bytes.NewBuffer(buf)
	_, err := b.ReadFrom(io.LimitReader(r, int64(limit-len(buf)+1)))
	return b.Bytes(), err
}

// prefixed is an answer's body read from a pooled buffer (then from the
// rest of the API server's body when close is set); Close returns the
// buffer.
type prefixed struct {
	mu     sync.Mutex
	reader io.Reader
	close  func() error
	buf    *[]byte
}

// Read reads the answer.
func (p *prefixed) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reader.Read(b)
}

// Close returns the buffer to the pool, and closes the API server's
// body if it is still read from.
func (p *prefixed) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.buf != nil {
		p.reader = bytes.NewReader(nil)
		pool(p.buf)
		p.buf = nil
	}
	if p.close != nil {
		return p.close()
	}
	return nil
}

// watchBody is a protobuf watch's body (frames of a 4-byte big-endian
// length, then a metav1.WatchEvent) with each event slimmed.
type watchBody struct {
	src io.ReadCloser
	// pending is what is left to read of the last frame, slimmed.
	pending []byte
	// through is what is left to copy of a frame too large to slim.
	through int
	in, out []byte
}

// Read reads the slimmed frames.
func (w *watchBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(w.pending) == 0 && w.through > 0 {
		n, err := w.src.Read(p[:min(len(p), w.through)])
		w.through -= n
		if err == io.EOF && w.through > 0 {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	}
	if len(w.pending) == 0 {
		if err := w.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, w.pending)
	w.pending = w.pending[n:]
	return n, nil
}

// next reads the next frame into pending: slimmed, as it came if it
// cannot be, its header only (the rest to copy through) if too large.
func (w *watchBody) next() error {
	if cap(w.out) > keepBuffer {
		w.out = nil
	}
	var header [4]byte
	if _, err := io.ReadFull(w.src, header[:]); err != nil {
		return err
	}
	size := int(binary.BigEndian.Uint32(header[:]))
	if size > MaxFrame {
		w.out = append(w.out[:0], header[:]...)
		w.pending, w.through = w.out, size
		return nil
	}
	if cap(w.in) < size {
		w.in = make([]byte, size)
	}
	frame := w.in[:size]
	if _, err := io.ReadFull(w.src, frame); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	out, ok := appendWatchEvent(append(w.out[:0], header[:]...), frame)
	if ok {
		binary.BigEndian.PutUint32(out, uint32(len(out)-len(header)))
	} else {
		out = append(append(out[:0], header[:]...), frame...)
	}
	w.out, w.pending = out, out
	if cap(w.in) > keepBuffer {
		w.in = nil
	}
	return nil
}

// Close closes the API server's body (a Read under way then fails).
func (w *watchBody) Close() error { return w.src.Close() }
