package skim

// A caller that reads the members it keeps itself, in one pass over a
// document, asks a Table which members are kept and skips the rest with
// Skip: the validation is the one Skim applies to what it drops.

// Keeps reports whether t keeps the member key of the object t is the
// Table of.
func (t *Table) Keeps(key []byte) bool { return t.lookup(key) != nil }

// Sub returns the Table of the members kept of member key's value; nil
// when t keeps that value whole, or does not keep key.
func (t *Table) Sub(key string) *Table {
	if m := t.lookup([]byte(key)); m != nil {
		return m.sub
	}
	return nil
}

// Skip returns the offset just past the JSON value at data[i:] (after any
// whitespace), validated as Skim validates what it drops. depth is the
// number of arrays and objects open around the value: they count against
// the standard decoder's nesting limit, as the value's own do.
func Skip(data []byte, i, depth int) (int, error) {
	s := scanner{data: data, i: i, outer: depth}
	err := s.skipValue()
	return s.i, err
}

// PlainString returns the offset just past the JSON string at data[i]
// when it holds no escape and no control character (its contents are then
// data[i+1:end-1], as a decoder reads them but for invalid UTF-8), and
// whether all its bytes are ASCII (when not, the caller who reads it as
// a decoder would checks its UTF-8); ok is false for any other string,
// and for a value that is not a string.
func PlainString(data []byte, i int) (end int, ascii, ok bool) {
	if i >= len(data) || data[i] != '"' {
		return i, false, false
	}
	end, ascii = asciiRun(data, i+1), true
	if end < len(data) && data[end] >= 0x80 {
		end, ascii = plainRun(data, end), false
	}
	if end >= len(data) || data[end] != '"' {
		return end, ascii, false
	}
	return end + 1, ascii, true
}
