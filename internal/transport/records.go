package transport

import (
	"encoding/binary"
	"io"
)

// recordHeaderLen is the size of a TLS record's header: its content type,
// version and length (RFC 8446, section 5.1).
const recordHeaderLen = 5

// recordBound reads a TLS connection's bytes no further than the end of
// the record being read. crypto/tls reads a record into a buffer of the
// connection's that it never shrinks, and asks for as many bytes as the
// buffer has room for: a client sending a body fast hands it the start
// of the next record with each one, and the buffer grows beyond a
// record's size, up to 128 KiB, for as long as the connection lives (the
// connections of the scale benchmark's worst case held 12.8 MB so, in a
// heap of 195 MB at 100,000 Locks and a million objects, 2026-12-07
// 18:11). Read one record at a time, it stays at the size crypto/tls
// grows it to for one record of 16 KiB: 32 KiB
// (TestTLSInputBufferOneRecord).
//
// It costs a read of the header's five bytes of their own, one system
// call more per record than crypto/tls would make when a record is small:
// no cost showed through the noise of make bench's section 2
// (docs/history/webhook-throughput.md, session 42).
type recordBound struct {
	header [recordHeaderLen]byte
	// headerRead is how much of the header of the record now read has
	// been; left, once all of it has, is how much of its body is still to
	// come.
	headerRead, left int
}

// read reads from r into p, up to the end of the header or body being
// read.
func (b *recordBound) read(r io.Reader, p []byte) (int, error) {
	if len(p) == 0 {
		return r.Read(p)
	}
	if b.headerRead < recordHeaderLen {
		n, err := r.Read(p[:min(len(p), recordHeaderLen-b.headerRead)])
		copy(b.header[b.headerRead:], p[:n])
		b.headerRead += n
		if b.headerRead == recordHeaderLen {
			b.left = int(binary.BigEndian.Uint16(b.header[3:]))
			if b.left == 0 {
				b.headerRead = 0
			}
		}
		return n, err
	}
	n, err := r.Read(p[:min(len(p), b.left)])
	b.left -= n
	if b.left == 0 {
		b.headerRead = 0
	}
	return n, err
}
