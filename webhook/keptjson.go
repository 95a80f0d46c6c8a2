package webhook

import (
	"hash/maphash"
	"sync/atomic"
	"unicode/utf8"

	"github.com/navique/lockguard/internal/skim"
)

// The JSON reading of decodeKept: a reader of the values it reads, which
// gives up (bad) at anything it would read otherwise than
// sigs.k8s.io/json, and skips the others with skim.Skip.

// keptDecoder reads b left to right; bad is set at the first thing it
// does not read as decodeStandard would, and every read after is a no-op.
type keptDecoder struct {
	b     []byte
	i     int
	depth int // objects open around i, for skim.Skip's nesting limit
	bad   bool
}

func (d *keptDecoder) fail() { d.bad = true }

// once fails on a member read twice in one object (bit is its bit in
// seen): the standard decoder merges or overwrites, decodeKept leaves that
// to it.
func (d *keptDecoder) once(seen *uint16, bit uint16) {
	if *seen&bit != 0 {
		d.fail()
	}
	*seen |= bit
}

// ws skips JSON whitespace.
func (d *keptDecoder) ws() {
	if d.i < len(d.b) && d.b[d.i] > ' ' {
		return // the common case: no whitespace at all
	}
	for d.i < len(d.b) {
		switch d.b[d.i] {
		case ' ', '\t', '\r', '\n':
			d.i++
		default:
			return
		}
	}
}

// peek is the next byte after whitespace; 0 at the end.
func (d *keptDecoder) peek() byte {
	d.ws()
	if d.i < len(d.b) {
		return d.b[d.i]
	}
	return 0
}

// null reads a null if one is next. Given that no member is read twice,
// a null leaves the decoded value as it is, as the standard decoder does:
// the zero value of any type of Request (a nil pointer, map or slice, a
// zero struct, and an empty ObjectSpec or ObjectStatus, whose
// UnmarshalJSON the standard decoder calls with "null"); in a map or an
// array, the element's zero value.
func (d *keptDecoder) null() bool {
	if d.bad || d.peek() != 'n' {
		return false
	}
	return d.literal("null")
}

// rawStr reads a string of no escapes and valid UTF-8, returning its
// contents (a slice of b).
func (d *keptDecoder) rawStr() []byte {
	if d.bad || d.peek() != '"' {
		d.fail()
		return nil
	}
	end, ascii, ok := skim.PlainString(d.b, d.i)
	if !ok {
		d.fail()
		return nil
	}
	s := d.b[d.i+1 : end-1]
	if !ascii && !utf8.Valid(s) {
		d.fail() // the standard decoder writes U+FFFD
		return nil
	}
	d.i = end
	return s
}

// strBytes reads a string, in place in the body (nil for null); false when
// it is not one the decoder reads (d.bad).
func (d *keptDecoder) strBytes() ([]byte, bool) {
	if d.null() {
		return nil, true
	}
	s := d.rawStr()
	return s, !d.bad
}

// str reads a string; "" for null.
func (d *keptDecoder) str() string {
	if s, ok := d.strBytes(); ok {
		return string(s)
	}
	return ""
}

// sharedStr reads a string as str does, the same copy for the strings
// reviews repeat (sharedString).
func (d *keptDecoder) sharedStr() string {
	if s, ok := d.strBytes(); ok {
		return sharedString(s)
	}
	return ""
}

// strIs reads a string as str does and reports whether it is want,
// copying nothing.
func (d *keptDecoder) strIs(want string) bool {
	s, ok := d.strBytes()
	return ok && string(s) == want
}

// sharedStrings is a small cache of the strings that reviews repeat (the
// group, version and kind of the object, its namespace, the user, label
// keys and values): a hit costs no allocation. It is bounded: sharedSlots
// strings of at most sharedMaxLen bytes, a slot holding the last string
// hashed to it (maphash, seeded per process: no client chooses what it
// evicts).
var (
	sharedStrings [sharedSlots]atomic.Pointer[string]
	sharedSeed    = maphash.MakeSeed()
)

const (
	sharedSlots  = 256
	sharedMaxLen = 64
)

// sharedString returns string(b), from sharedStrings when it holds it.
func sharedString(b []byte) string {
	if len(b) > sharedMaxLen {
		return string(b)
	}
	slot := &sharedStrings[maphash.Bytes(sharedSeed, b)%sharedSlots]
	if p := slot.Load(); p != nil && *p == string(b) {
		return *p
	}
	s := string(b)
	slot.Store(&s)
	return s
}

// boolean reads true or false; false for null.
func (d *keptDecoder) boolean() bool {
	if d.bad || d.null() {
		return false
	}
	switch d.peek() {
	case 't':
		return d.literal("true")
	case 'f':
		d.literal("false")
		return false
	}
	d.fail()
	return false
}

// literal reads lit; true when it was there.
func (d *keptDecoder) literal(lit string) bool {
	if len(d.b)-d.i < len(lit) || string(d.b[d.i:d.i+len(lit)]) != lit {
		d.fail()
		return false
	}
	d.i += len(lit)
	return true
}

// object reads an object, calling member with each key t keeps (every
// key when t is nil), positioned at its value, which member must read
// whole, and skipping the others; nothing for null.
func (d *keptDecoder) object(t *skim.Table, member func(key []byte)) {
	if d.null() {
		return
	}
	if d.bad || d.peek() != '{' {
		d.fail()
		return
	}
	d.depth++ // at most five: object reads only what the Tables keep
	d.i++
	if d.peek() == '}' {
		d.i++
		d.depth--
		return
	}
	for !d.bad {
		key := d.rawStr()
		if d.bad || d.peek() != ':' {
			d.fail()
			return
		}
		d.i++
		if t != nil && !t.Keeps(key) {
			d.skip()
		} else {
			member(key)
		}
		switch d.peek() {
		case ',':
			d.i++
		case '}':
			d.i++
			d.depth--
			return
		default:
			d.fail()
		}
	}
}

// skip skips the next value, validating it (skim.Skip: the nesting limit
// counts the objects open around it).
func (d *keptDecoder) skip() {
	if d.bad {
		return
	}
	end, err := skim.Skip(d.b, d.i, d.depth)
	if err != nil {
		d.fail()
		return
	}
	d.i = end
}

// raw returns the next value whole, validated, for a type with its own
// UnmarshalJSON; nil for null.
func (d *keptDecoder) raw() []byte {
	if d.bad || d.null() {
		return nil
	}
	from := d.i
	d.skip()
	if d.bad {
		return nil
	}
	return d.b[from:d.i]
}

// lenientObject reports whether an object is next; when not, it skips
// the value, as the lenient UnmarshalJSONs of ObjectSpec and ObjectStatus
// ignore a value that is not an object (null included).
func (d *keptDecoder) lenientObject() bool {
	if d.bad || d.peek() == '{' {
		return !d.bad
	}
	d.skip()
	return false
}

// lenientStr reads a string as str does; a value of another type is
// skipped and read as "", as the lenient UnmarshalJSONs read an any that
// is not a string.
func (d *keptDecoder) lenientStr() string {
	if d.bad || d.peek() == '"' {
		return d.str()
	}
	d.skip()
	return ""
}

// strings reads an array of strings; nil for null.
func (d *keptDecoder) strings() []string {
	if d.null() {
		return nil
	}
	if d.bad || d.peek() != '[' {
		d.fail()
		return nil
	}
	d.i++
	out := []string{}
	if d.peek() == ']' {
		d.i++
		return out
	}
	for !d.bad {
		out = append(out, d.str())
		switch d.peek() {
		case ',':
			d.i++
		case ']':
			d.i++
			return out
		default:
			d.fail()
		}
	}
	return nil
}
