package transport

import (
	"bytes"
	"encoding/binary"
	"io"
)

const (
	// recordHeaderLen is the size of a TLS record's header: its content
	// type, version and length (RFC 8446, section 5.1).
	recordHeaderLen = 5
	// maxRecordLen is the largest record crypto/tls reads, header
	// included: TLS 1.2's largest ciphertext (RFC 5246, section 6.2.3;
	// TLS 1.3's is smaller).
	maxRecordLen = recordHeaderLen + 1<<14 + 2048
	// recordRoom is the room crypto/tls makes in its buffer to read the
	// rest of a record: what it lacks of it, and bytes.MinRead more.
	recordRoom = maxRecordLen + bytes.MinRead
	// aheadLen is the most a read at a record's start takes, so that a
	// small record comes in one read with its header, where its header
	// alone would take a read of its own.
	aheadLen = 8 << 10
	// oneRecordCap is the buffer crypto/tls grows for one record of TLS
	// 1.3's largest, read on its own (TestTLSInputBufferOneRecord):
	// reading ahead must not make it grow further (TLS 1.2's largest
	// records, 2 KiB longer, grow it to 40 KiB read one at a time, and
	// reading ahead does not make that more either:
	// TestRecordBoundCryptoTLSBuffer).
	oneRecordCap = 32 << 10
)

// recordBound reads a TLS connection's bytes so that crypto/tls's buffer
// of bytes not yet decrypted stays at one record's size. crypto/tls never
// shrinks that buffer, and asks for as many bytes as it has room for: a
// client sending a body fast hands it the start of the next records with
// each one, and the buffer grows beyond a record's size, up to 128 KiB,
// for as long as the connection lives (the connections of the scale
// benchmark's worst case held 12.8 MB so, in a heap of 195 MB at 100,000
// Locks and a million objects, 2026-12-07 18:11). It stays at 32 KiB
// (oneRecordCap) read so.
//
// A read within a record goes no further than the record's end. A read at
// a record's start (crypto/tls's buffer is then empty: it asks for bytes
// only when it lacks some of the record it reads) takes up to aheadLen
// bytes, the next records' included, where the buffer has room for them
// and for a whole record after them, or where the buffer is so small that
// crypto/tls's doubling of it for such a record stays within
// oneRecordCap (aheadFits): a review of a few KiB then takes one read,
// where reading its header apart took two.
type recordBound struct {
	header [recordHeaderLen]byte
	// headerRead is how much of the header of the record now read has
	// been; left, once all of it has, is how much of its body is still to
	// come. Both are 0 at a record's start.
	headerRead, left int
}

// aheadFits reports whether a read at a record's start may take up to
// aheadLen bytes into free, the room of crypto/tls's buffer, which is
// empty then. Of the bytes read, the last record's may be incomplete,
// starting up to aheadLen into the buffer; crypto/tls then makes room for
// the rest of it (at most recordRoom after its start): that needs no
// growth where free holds it, and where free is at most half of
// oneRecordCap, the buffer grows to at most twice free (bytes.Buffer
// doubles it) or to the bytes needed, both within oneRecordCap.
func aheadFits(free int) bool {
	return free >= aheadLen+recordRoom || free <= oneRecordCap/2
}

// The bytes crypto/tls needs for a record that starts aheadLen into its
// buffer fit in oneRecordCap: this fails to compile where they do not.
var _ [oneRecordCap - aheadLen - recordRoom]struct{}

// read reads from r into p: no further than the end of the header or
// body being read, or, at a record's start, up to aheadLen bytes where
// aheadFits(len(p)).
func (b *recordBound) read(r io.Reader, p []byte) (int, error) {
	var want int
	switch {
	case len(p) == 0:
		return r.Read(p)
	case b.headerRead == 0 && aheadFits(len(p)):
		want = aheadLen
	case b.headerRead < recordHeaderLen:
		want = recordHeaderLen - b.headerRead
	default:
		want = b.left
	}
	n, err := r.Read(p[:min(len(p), want)])
	b.pass(p[:n])
	return n, err
}

// pass moves the record boundaries past the bytes q read.
func (b *recordBound) pass(q []byte) {
	for len(q) > 0 {
		if b.headerRead < recordHeaderLen {
			k := copy(b.header[b.headerRead:], q)
			b.headerRead += k
			q = q[k:]
			if b.headerRead == recordHeaderLen {
				b.left = int(binary.BigEndian.Uint16(b.header[3:]))
				if b.left == 0 {
					b.headerRead = 0
				}
			}
			continue
		}
		k := min(len(q), b.left)
		b.left -= k
		q = q[k:]
		if b.left == 0 {
			b.headerRead = 0
		}
	}
}
