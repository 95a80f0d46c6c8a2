package transport

import (
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// closeEarlyAnswers wraps h so that an HTTP/1 request answered before its
// body was read to the end (a refusal before the Gate: 403, 404, 405; the
// Gate's 413, 429, 408) is answered with Connection: close and its
// connection closed without reading the rest: net/http would otherwise
// drain an unread body under 256 KiB after the handler returns (and
// before it sends the answer), with whatever read deadline the connection
// has. A response written after the whole body was read keeps the
// connection. HTTP/2 streams need none of this: an unread body does not
// hold the connection.
func closeEarlyAnswers(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		// One allocation for both.
		both := &struct {
			body eofBody
			ew   earlyWriter
		}{body: eofBody{ReadCloser: r.Body}}
		body, ew := &both.body, &both.ew
		ew.ResponseWriter, ew.body = w, body
		r.Body = body
		h.ServeHTTP(ew, r)
		if !ew.wrote {
			// net/http answers 200 for a handler that wrote nothing.
			ew.WriteHeader(http.StatusOK)
		}
	})
}

// eofBody is a request body that records whether it was read to its end.
type eofBody struct {
	io.ReadCloser
	eof atomic.Bool
}

func (b *eofBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	return n, err
}

// earlyWriter is the http.ResponseWriter of closeEarlyAnswers.
type earlyWriter struct {
	http.ResponseWriter
	body  *eofBody
	wrote bool
}

// WriteHeader closes the connection after the answer when the body was
// not read to its end: Connection: close, and a read deadline in the
// past, so that net/http's drain of the body (and any read) ends at once.
func (w *earlyWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if !w.body.eof.Load() {
			w.Header().Set("Connection", "close")
			_ = http.NewResponseController(w.ResponseWriter).SetReadDeadline(time.Unix(1, 0))
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *earlyWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Flush sends what was written so far (a streamed answer).
func (w *earlyWriter) Flush() {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap gives http.ResponseController the server's writer.
func (w *earlyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
