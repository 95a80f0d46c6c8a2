package skim

import (
	"encoding/binary"
	"testing"
)

// TestMayStop: mayStop flags every word that holds a quote, a backslash
// or a control character, wherever it is and whatever the other bytes
// are, and no word of plain bytes.
func TestMayStop(t *testing.T) {
	plain := []byte{' ', '!', '#', 'a', '[', ']', '~', 0x7f, 0x80, 0xc3, 0xff, 0x21, 0x5b, 0x5d}
	stops := []byte{'"', '\\', 0x00, 0x01, 0x0a, 0x1f}
	word := func(b [8]byte) uint64 { return binary.LittleEndian.Uint64(b[:]) }
	for _, p := range plain {
		for _, q := range plain {
			w := [8]byte{p, q, p, q, q, p, q, p}
			if mayStop(word(w)) {
				t.Errorf("mayStop(% x) = true, a word of plain bytes", w)
			}
			for _, c := range stops {
				for i := range 8 {
					v := w
					v[i] = c
					if !mayStop(word(v)) {
						t.Errorf("mayStop(% x) = false, byte %d is %#x", v, i, c)
					}
				}
			}
		}
	}
}
