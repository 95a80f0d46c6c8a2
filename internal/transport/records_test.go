package transport

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"io"
	"net"
	"reflect"
	"testing"
	"testing/iotest"
	"time"
)

// records is a stream of TLS records with bodies of the sizes given, and
// the offsets where each header and each body ends.
func records(sizes ...int) (stream []byte, ends []int) {
	for i, n := range sizes {
		stream = append(stream, 23, 3, 3, 0, 0)
		binary.BigEndian.PutUint16(stream[len(stream)-2:], uint16(n))
		ends = append(ends, len(stream))
		stream = append(stream, bytes.Repeat([]byte{byte(i)}, n)...)
		if n > 0 {
			ends = append(ends, len(stream))
		}
	}
	return stream, ends
}

func TestRecordBound(t *testing.T) {
	stream, ends := records(300, 0, 1, 16640, 5, 16384, 0)
	for name, wrap := range map[string]func(io.Reader) io.Reader{
		"whole reads": func(r io.Reader) io.Reader { return r },
		"byte reads":  iotest.OneByteReader,
		"half reads":  iotest.HalfReader,
	} {
		t.Run(name, func(t *testing.T) {
			var b recordBound
			r := wrap(bytes.NewReader(stream))
			var got []byte
			buf := make([]byte, 64<<10)
			for {
				n, err := b.read(r, buf)
				from, to := len(got), len(got)+n
				got = append(got, buf[:n]...)
				for _, end := range ends {
					if from < end && end < to {
						t.Fatalf("a read of bytes %d to %d crosses the end of a header or record at %d", from, to, end)
					}
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if !bytes.Equal(got, stream) {
				t.Fatalf("read %d bytes, not the %d of the stream as they were", len(got), len(stream))
			}
		})
	}
}

// TestTLSInputBufferOneRecord checks that a connection reading a body sent
// as fast as it can be keeps crypto/tls's input buffer at one record's
// size: 32 KiB, as crypto/tls grows it for a record of 16 KiB. Without
// recordBound it grew to 40 KiB here, and to 128 KiB in the scale
// benchmark's worst case.
func TestTLSInputBufferOneRecord(t *testing.T) {
	pair := loopbackPair(t)
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := tls.NewListener(fairListen(raw, 10, 10), &tls.Config{Certificates: []tls.Certificate{pair}})
	defer ln.Close()
	const size = 8 << 20
	go func() {
		c, err := tls.Dial("tcp", raw.Addr().String(), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			ln.Close() // Accept fails, rather than waiting for the test's timeout
			return
		}
		defer c.Close()
		_, _ = c.Write(make([]byte, size))
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tc := c.(*tls.Conn)
	_ = tc.SetReadDeadline(time.Now().Add(time.Minute))
	// Read slowly, a little at a time, so that the kernel has the body's
	// next records waiting at each read of the connection.
	largest, buf := 0, make([]byte, 1<<10)
	for read := 0; read < size; {
		n, err := tc.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		read += n
		if read%(256<<10) < n {
			time.Sleep(time.Millisecond)
		}
		largest = max(largest, inputBufferCap(t, tc))
	}
	t.Logf("largest input buffer: %d bytes", largest)
	if largest > 32<<10 {
		t.Fatalf("crypto/tls's input buffer grew to %d bytes reading a fast body, more than one record's 32 KiB", largest)
	}
}

// inputBufferCap is the capacity of tc's buffer of bytes read and not yet
// decrypted (crypto/tls's Conn.rawInput), or skips the test when this Go's
// crypto/tls has no such field.
func inputBufferCap(t *testing.T, tc *tls.Conn) int {
	f := reflect.ValueOf(tc).Elem().FieldByName("rawInput")
	if !f.IsValid() || f.Type() != reflect.TypeOf(bytes.Buffer{}) {
		t.Skip("crypto/tls.Conn has no rawInput bytes.Buffer in this Go")
	}
	return f.FieldByName("buf").Cap()
}
