package readmodel

import "unsafe"

// A Meta's name is in the Meta's own allocation, right after its fields:
// a byte of its length, then its bytes, in the smallest of Go's size
// classes that holds them (newMetaNamed). The name was a string of its
// own: at a million objects, a million allocations of 16 bytes or more
// (17 MB at the scale benchmark's, "u-123456") and as many pointers for
// the collector to follow (issue 38). A Meta of a name of up to 15 bytes
// is 48 bytes in all, as the Meta alone was. A name longer than
// maxInlineName, or one set after the Meta is made (SetName: the bytes
// of a name are never changed, as a string's are not), is in the rare
// part, the length byte longName.
//
// A Meta is therefore made only by newMetaNamed (newMeta): a Meta
// declared or made otherwise has no length byte to read.

// metaTail is a Meta and the bytes of its name.
type metaTail[T any] struct {
	Meta
	tail T
}

const (
	// maxInlineName is the longest name kept in the Meta's allocation.
	maxInlineName = 254
	// longName, as a name's length byte, says the name is in the rare
	// part.
	longName = 255
	// metaSize is where the name's length byte is in the allocation.
	metaSize = unsafe.Sizeof(Meta{})
)

// newMetaNamed returns a new Meta named name; a name longer than
// maxInlineName goes to the rare part of s, the shape newMeta is making
// for it.
func newMetaNamed(name string, s *metaShape) *Meta {
	var m *Meta
	switch n := 1 + len(name); {
	case n <= 16:
		m = &new(metaTail[[16]byte]).Meta
	case n <= 32:
		m = &new(metaTail[[32]byte]).Meta
	case n <= 48:
		m = &new(metaTail[[48]byte]).Meta
	case n <= 64:
		m = &new(metaTail[[64]byte]).Meta
	case n <= 96:
		m = &new(metaTail[[96]byte]).Meta
	case n <= 128:
		m = &new(metaTail[[128]byte]).Meta
	case n <= 192:
		m = &new(metaTail[[192]byte]).Meta
	case n <= 1+maxInlineName:
		m = &new(metaTail[[1 + maxInlineName]byte]).Meta
	default:
		m = &new(metaTail[[1]byte]).Meta
		s.moreRest().name = name
		*m.nameLength() = longName
		return m
	}
	*m.nameLength() = byte(len(name))
	copy(unsafe.Slice(m.nameBytes(), len(name)), name)
	return m
}

// nameLength is the byte of the name's length, after m's fields.
func (m *Meta) nameLength() *byte { return (*byte)(unsafe.Add(unsafe.Pointer(m), metaSize)) }

// nameBytes is the first byte of the name, after its length.
func (m *Meta) nameBytes() *byte { return (*byte)(unsafe.Add(unsafe.Pointer(m), metaSize+1)) }

// GetName returns the name.
func (m *Meta) GetName() string {
	n := *m.nameLength()
	if n == longName {
		return m.restOf().name
	}
	return unsafe.String(m.nameBytes(), int(n))
}

// SetName sets the name: in the rare part, the bytes of the name m was
// made with staying as they are.
func (m *Meta) SetName(name string) {
	m.moreRest().name = name
	*m.nameLength() = longName
}
