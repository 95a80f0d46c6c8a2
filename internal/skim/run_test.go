package skim

import "testing"

// TestRun: plainRun and asciiRun stop at the first byte that ends a
// string's plain run (a quote, a backslash, a control character; for
// asciiRun a byte over 0x7f too), wherever it is in or across the words
// they read eight at a time, whatever the bytes around it, and run to the
// end of data where there is none: against the byte-by-byte definition.
func TestRun(t *testing.T) {
	plain := []byte{' ', '!', '#', 'a', '[', ']', '~', 0x7f, 0x21, 0x5b, 0x5d}
	high := []byte{0x80, 0xc3, 0xa9, 0xff}
	stopBytes := []byte{'"', '\\', 0x00, 0x01, 0x0a, 0x1f}
	want := func(data []byte, i int, ascii bool) int {
		for ; i < len(data); i++ {
			if c := data[i]; c == '"' || c == '\\' || c < 0x20 || ascii && c >= 0x80 {
				return i
			}
		}
		return i
	}
	check := func(data []byte, from int) {
		t.Helper()
		if got, w := plainRun(data, from), want(data, from, false); got != w {
			t.Fatalf("plainRun(% x, %d) = %d, want %d", data, from, got, w)
		}
		if got, w := asciiRun(data, from), want(data, from, true); got != w {
			t.Fatalf("asciiRun(% x, %d) = %d, want %d", data, from, got, w)
		}
	}
	// Every byte value, alone in plain or high bytes, at every offset of
	// two words and a tail.
	for _, fill := range []byte{'a', 0xc3} {
		for c := range 256 {
			for at := range 19 {
				data := make([]byte, 19)
				for i := range data {
					data[i] = fill
				}
				data[at] = byte(c)
				for from := range at + 1 {
					check(data, from)
				}
			}
		}
	}
	// A stopping byte, then a second after it, among mixed plain and
	// high bytes: the first is found, whatever borrows the second makes.
	for n := range 20 {
		for _, p := range append(append([]byte{}, plain...), high...) {
			for _, q := range []byte{'a', 0xc3} {
				data := make([]byte, n)
				for i := range data {
					data[i] = []byte{p, q}[i%3%2]
				}
				check(data, 0)
				for _, c := range append(append([]byte{}, stopBytes...), high...) {
					for at := range n {
						v := append([]byte{}, data...)
						v[at] = c
						check(v, 0)
						for _, c2 := range stopBytes {
							for at2 := at + 1; at2 < n; at2++ {
								w := append([]byte{}, v...)
								w[at2] = c2
								check(w, 0)
							}
						}
					}
				}
			}
		}
	}
}
