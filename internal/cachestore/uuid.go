package cachestore

import "encoding/hex"

// A Store keeps an index value that is a UUID in canonical form (an
// owner's UID: the owner index's values) as its 16 bytes; readmodel keeps
// objects' UIDs so. The two functions below convert.

// ParseUUID returns the bytes of s when s is a UUID in canonical form
// (8-4-4-4-12 lower-case hexadecimal digits), not all zeros, so that
// FormatUUID gives s back.
func ParseUUID(s string) ([16]byte, bool) {
	var b [16]byte
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := lowerHex(s[i])
		lo, ok2 := lowerHex(s[i+1])
		if !ok1 || !ok2 {
			return [16]byte{}, false
		}
		b[j] = hi<<4 | lo
		i, j = i+2, j+1
	}
	return b, b != [16]byte{}
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// FormatUUID writes b as a UUID in canonical form.
func FormatUUID(b [16]byte) string {
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}
