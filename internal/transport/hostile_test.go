package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/navique/lockguard/certs"
)

// loopbackPair is a self-signed certificate and key for 127.0.0.1.
func loopbackPair(t *testing.T) tls.Certificate {
	t.Helper()
	ss, err := certs.GenerateSelfSigned([]string{"127.0.0.1"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(ss.Cert, ss.Key)
	if err != nil {
		t.Fatal(err)
	}
	return pair
}

// testServer starts a Server of o on a free loopback port with a
// self-signed certificate (HTTP/1.1 only, unless o.TLSOpts say otherwise)
// and handlers registered by register, and returns its address; it stops
// when the test ends.
func testServer(t *testing.T, o ServerOptions, register func(*Server)) string {
	t.Helper()
	pair := loopbackPair(t)
	o.Host, o.Port = "127.0.0.1", freePort(t)
	o.TLSOpts = append([]func(*tls.Config){func(c *tls.Config) { c.Certificates = []tls.Certificate{pair}; c.NextProtos = []string{"http/1.1"} }}, o.TLSOpts...)
	s := NewServer(o)
	register(s)
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() { errs <- s.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errs; err != nil {
			t.Error(err)
		}
	})
	addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// dialFrom opens a TLS connection to addr from the loopback address from
// (all of 127.0.0.0/8 is loopback on Linux), failing after timeout.
func dialFrom(from, addr string, timeout time.Duration) (*tls.Conn, error) {
	d := &net.Dialer{Timeout: timeout, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := tls.Client(raw, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	_ = c.SetDeadline(time.Now().Add(timeout))
	if err := c.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// halfBody is the head of a POST to path declaring a body of length
// bytes, and the body's first byte.
func halfBody(path string, length int) string {
	return "POST " + path + " HTTP/1.1\r\nHost: lockguard\r\nContent-Type: application/json\r\nContent-Length: " +
		strconv.Itoa(length) + "\r\n\r\n{"
}

// readAnswer reads what the server sends on c until it closes c or
// within lasts; it returns what arrived and whether c was closed.
func readAnswer(c net.Conn, within time.Duration) (string, bool) {
	_ = c.SetReadDeadline(time.Now().Add(within))
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		var ne net.Error
		switch {
		case err == nil:
		case errors.As(err, &ne) && ne.Timeout():
			return string(got), false
		default: // EOF, or a reset after the answer.
			return string(got), true
		}
	}
}

// TestEarlyAnswersClose: a request answered before its body is read (a
// refusal before the Gate, a path nothing serves, the Gate's 429) gets
// its answer at once with Connection: close, and its connection is closed
// without waiting for the rest of the body, whatever length it declares.
// net/http alone would first drain an unread body under 256 KiB with no
// read deadline (issue 36, item 1).
func TestEarlyAnswersClose(t *testing.T) {
	full := NewGate(Limits{MaxInFlight: 1}, nil)
	if held, _ := full.share.enter("127.0.0.9", time.Now().Add(time.Hour), nil); held == nil {
		t.Fatal("the Gate admits nothing")
	}
	open := NewGate(Limits{}, nil)
	addr := testServer(t, ServerOptions{}, func(s *Server) {
		s.Register("/peers/pending", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "no client certificate", http.StatusForbidden)
		}))
		s.Register("/validate", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			full.Serve(w, r, MaxReviewSize, func(context.Context, *Body) { t.Error("the full Gate served a request") })
		}))
		s.Register("/validate-open", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			open.Serve(w, r, MaxReviewSize, func(context.Context, *Body) { t.Error("a body over the limit was served") })
		}))
	})
	cases := map[string]struct {
		reason string
		path   string
		length int
		status string
	}{
		"ForbiddenSmall":    {reason: "A 403 before the body is read; a declared body net/http would drain.", path: "/peers/pending", length: 1000, status: "403"},
		"ForbiddenLarge":    {reason: "A 403 before the body is read; a declared body over 256 KiB.", path: "/peers/pending", length: 7_000_000, status: "403"},
		"NotFoundSmall":     {reason: "A path nothing serves.", path: "/no-such-path", length: 1000, status: "404"},
		"NotFoundLarge":     {reason: "A path nothing serves, a large body.", path: "/no-such-path", length: 7_000_000, status: "404"},
		"TooManyInFlight":   {reason: "The Gate's 429 before reading.", path: "/validate", length: 1000, status: "429"},
		"TooLargeAtOnce":    {reason: "The Gate's 413 for a declared length over the limit.", path: "/validate-open", length: MaxReviewSize + 1, status: "413"},
		"NotFoundOneLength": {reason: "The smallest body.", path: "/no-such-path", length: 2, status: "404"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, err := dialFrom("127.0.0.1", addr, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := io.WriteString(c, halfBody(tc.path, tc.length)); err != nil {
				t.Fatal(err)
			}
			got, closed := readAnswer(c, 5*time.Second)
			if !strings.HasPrefix(got, "HTTP/1.1 "+tc.status+" ") || !closed {
				t.Errorf("%s\nPOST %s declaring %d bytes, one sent: got %q (closed %t), want HTTP %s and the connection closed",
					tc.reason, tc.path, tc.length, got, closed, tc.status)
			}
			if !strings.Contains(got, "\r\nConnection: close\r\n") {
				t.Errorf("%s\nPOST %s: answer %q without Connection: close", tc.reason, tc.path, got)
			}
		})
	}
}

// TestConnectionsFairlyShared: a source holding every connection slot
// (here with TLS handshakes it never finishes) does not keep another
// source out: a new connection from 127.0.0.1 is served at once while
// 127.0.0.2 holds all of MaxConnections (issue 36, item 1).
func TestConnectionsFairlyShared(t *testing.T) {
	addr := testServer(t, ServerOptions{Connections: ConnectionLimits{Max: 4}}, func(s *Server) {
		s.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	})
	var hostile []net.Conn
	defer func() {
		for _, c := range hostile {
			c.Close()
		}
	}()
	for range 8 {
		d := &net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		hostile = append(hostile, c)
	}
	c, err := dialFrom("127.0.0.1", addr, 3*time.Second)
	if err != nil {
		t.Fatalf("a new connection from 127.0.0.1 while 127.0.0.2 holds 8 handshakes: %v", err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: lockguard\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAnswer(c, 3*time.Second); !strings.HasPrefix(got, "HTTP/1.1 200 ") {
		t.Errorf("GET /ok from 127.0.0.1 while 127.0.0.2 holds 8 handshakes: %q, want HTTP 200", got)
	}
}
