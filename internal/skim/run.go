package skim

import (
	"encoding/binary"
	"math/bits"
)

// The runs of plain bytes in a string, read eight bytes at a time: what
// the scanner (str) and PlainString skip of a string's contents.

// plainRun returns the offset of the first quote, backslash or control
// character in data from i on; len(data) when there is none. It reads
// eight bytes at a time while eight remain, ending at the lowest byte
// that stops flags in a word (an exact match: see stops), and the last
// few bytes one by one.
func plainRun(data []byte, i int) int {
	return run(data, i, 0)
}

// asciiRun is plainRun that also stops at a byte over 0x7f (the first
// byte of a multi-byte UTF-8 sequence, or no UTF-8).
func asciiRun(data []byte, i int) int {
	return run(data, i, highs)
}

// run returns the offset of the first byte from i on that stops flags,
// or whose high bit is in high (0 or highs); len(data) when there is none.
func run(data []byte, i int, high uint64) int {
	for ; i+8 <= len(data); i += 8 {
		x := binary.LittleEndian.Uint64(data[i:])
		if m := stops(x) | x&high; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(data); i++ {
		if c := data[i]; c == '"' || c == '\\' || c < 0x20 || high != 0 && c >= 0x80 {
			return i
		}
	}
	return i
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// stops returns the high bits of the bytes of a word of eight (little
// endian: the first byte lowest) that may end a string's plain run: a
// quote, a backslash or a control character (below 0x20). Each test
// flags its lowest matching byte exactly ("Determine if a word has a zero
// byte" and "has a byte less than n", Bit Twiddling Hacks): a borrow can
// only flag bytes above a match, so the lowest flagged byte is a match,
// and a word with none has no flag.
func stops(x uint64) uint64 {
	q := x ^ (ones * '"')
	b := x ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (x-ones*0x20)&^x) & highs
}
