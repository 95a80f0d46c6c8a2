package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freePort returns a loopback port nothing listens on right now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServerBoundsConnectionsAndHeaders: a header over MaxHeaderBytes
// (plus the 4 KiB net/http allows beyond it) is refused (431) without
// reaching a handler, and past MaxConnections open
// connections from one source the next is closed at once: it is served
// once one of them closes.
func TestServerBoundsConnectionsAndHeaders(t *testing.T) {
	pair := loopbackPair(t)
	port := freePort(t)
	s := NewServer(ServerOptions{Host: "127.0.0.1", Port: port, Connections: ConnectionLimits{Max: 2},
		TLSOpts: []func(*tls.Config){func(c *tls.Config) { c.Certificates = []tls.Certificate{pair}; c.NextProtos = []string{"http/1.1"} }}})
	reached := 0
	s.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { reached++ }))
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() { errs <- s.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	dial := func() *tls.Conn {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
			if err == nil {
				return c
			}
			if time.Now().After(deadline) {
				t.Fatal(err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	get := func(c *tls.Conn, header string) string {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("GET /ok HTTP/1.1\r\nHost: x\r\n" + header + "\r\n")); err != nil {
			return "write: " + err.Error()
		}
		buf := make([]byte, 64)
		n, err := c.Read(buf)
		if err != nil {
			return "read: " + err.Error()
		}
		return string(buf[:n])
	}

	c1 := dial()
	defer c1.Close()
	if got := get(c1, "X-Big: "+strings.Repeat("a", DefaultMaxHeaderBytes+8192)+"\r\n"); !strings.Contains(got, " 431 ") {
		t.Errorf("a header over %d bytes: %q, want HTTP 431", DefaultMaxHeaderBytes, got)
	}
	if reached != 0 {
		t.Errorf("the handler was reached %d times by an oversized header", reached)
	}
	c1.Close()

	a, b := dial(), dial()
	defer a.Close()
	defer b.Close()
	if got := get(a, ""); !strings.Contains(got, " 200 ") {
		t.Fatalf("first connection: %q", got)
	}
	if got := get(b, ""); !strings.Contains(got, " 200 ") {
		t.Fatalf("second connection: %q", got)
	}
	// The third is closed at once: its TLS handshake cannot end.
	raw, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	third := tls.Client(raw, &tls.Config{InsecureSkipVerify: true})
	_ = third.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if err := third.Handshake(); err == nil {
		t.Fatal("a third connection was served with MaxConnections 2 held open")
	}
	raw.Close()
	a.Close()
	c3 := dial()
	defer c3.Close()
	if got := get(c3, ""); !strings.Contains(got, " 200 ") {
		t.Errorf("after one of two connections closed: %q, want a connection served", got)
	}
}
