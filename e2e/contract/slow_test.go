package contract_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// cutOffBound is how long a slow client may hold a connection before the
// server must have closed it. Both servers close a connection whose TLS
// handshake or request headers are not complete after controller-runtime's
// ReadHeaderTimeout (32s).
const cutOffBound = 60 * time.Second

// TestSlowClientsCutOff: a client that trickles its request headers, one
// byte every half second, or that starts a TLS handshake and stalls, is cut
// off by both servers, well before it would have finished.
func TestSlowClientsCutOff(t *testing.T) {
	inProcess(t)
	t.Parallel()
	// The four clients wait side by side, in one test: subtests would run
	// only GOMAXPROCS at a time.
	type result struct {
		name string
		took time.Duration
		err  error
	}
	results := make(chan result)
	clients := 0
	for _, ep := range endpoints() {
		clients += 2
		go func() {
			start := time.Now()
			err := trickleHeaders(ep)
			results <- result{ep.name + " trickled headers", time.Since(start), err}
		}()
		go func() {
			start := time.Now()
			err := stallHandshake(ep)
			results <- result{ep.name + " stalled handshake", time.Since(start), err}
		}()
	}
	for range clients {
		r := <-results
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		t.Logf("%s: cut off after %s", r.name, r.took.Round(100*time.Millisecond))
	}
}

// trickleHeaders completes a TLS handshake with ep, then sends request
// headers one byte every half second, and returns once the server closes
// the connection.
func trickleHeaders(ep endpoint) error {
	conn, err := tls.Dial("tcp", ep.addr, ep.tls())
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		_, _ = io.WriteString(conn, "POST "+ep.path+" HTTP/1.1\r\nHost: lockguard\r\nX-Slow: ")
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			if _, err := conn.Write([]byte("a")); err != nil {
				return
			}
		}
	}()
	return waitClosed(conn, start)
}

// stallHandshake sends the header of a TLS ClientHello record to ep, and
// nothing more, and returns once the server closes the connection.
func stallHandshake(ep endpoint) error {
	conn, err := net.Dial("tcp", ep.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	start := time.Now()
	if _, err := conn.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00}); err != nil {
		return err
	}
	return waitClosed(conn, start)
}

// waitClosed reads from conn until the server closes it, and returns an
// error if that takes longer than cutOffBound after start or the server
// answers anything.
func waitClosed(conn net.Conn, start time.Time) error {
	_ = conn.SetReadDeadline(start.Add(cutOffBound))
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	if n > 0 {
		return fmt.Errorf("the server answered %q", buf[:n])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("the server still holds the connection after %s", cutOffBound)
	}
	return nil
}
