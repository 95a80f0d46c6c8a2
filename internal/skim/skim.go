// Package skim reduces a JSON document to the members that a Go type
// reads, validating and skipping the rest without decoding it: lockguard's
// webhook skims an AdmissionReview (oldObject's spec and status can be
// megabytes) so that the standard decoder reads a few hundred bytes
// whatever the size of the objects. Only skipping is hand-written; every
// kept value is left to the caller's decoder. A caller may also read the
// kept members itself in one pass, asking the Table which they are and
// skipping the rest with Skip (lockguard's webhook does, in decodeKept,
// and falls back to sigs.k8s.io/json of what Skim keeps). FuzzSkim checks
// that the decode of what Skim keeps and the decode of the whole body
// agree on every input.
//
// It is a leaf: it knows JSON and Go types, nothing of admission or of
// Locks.
package skim

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// Fields are the members of a JSON object that a Go type reads: a member
// mapped to nil is kept whole, one mapped to Fields is skimmed in turn
// when its value is an object.
type Fields map[string]Fields

// Lenient is implemented by the types whose UnmarshalJSON reads only some
// members, whatever the rest of the value holds: FieldsOf reduces their
// values to SkimFields.
type Lenient interface {
	SkimFields() Fields
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	lenientType     = reflect.TypeFor[Lenient]()
)

// FieldsOf returns the members that the standard decoder reads into a
// value of type t, or nil (keep the value whole) when t is not a plain
// struct: keeping a value whole is always correct, only slower.
func FieldsOf(t reflect.Type) Fields {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(lenientType) {
		// Its UnmarshalJSON reads only these members, whatever the rest.
		return reflect.Zero(t).Interface().(Lenient).SkimFields()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	f := Fields{}
	for i := range t.NumField() {
		sf := t.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		switch {
		case sf.Anonymous:
			return nil // Embedded fields follow rules not worth repeating here.
		case !sf.IsExported() || name == "-":
			continue
		case name == "":
			return nil // Matched case-insensitively by encoding/json.
		}
		f[name] = FieldsOf(sf.Type)
	}
	return f
}

// Skim returns the JSON document body reduced to the members in f (at
// every level), in their order, duplicates included, so that the standard
// decoder reads the same values from it as from body. It validates what it
// drops as strictly as encoding/json: RFC 8259 grammar, no UTF-8
// validation, nesting limited to maxNestingDepth. A body that is not an
// object is returned as it is.
//
// It compiles f for this body alone: a caller that skims many bodies with
// the same Fields compiles them once (Compile) and calls Table.Append.
func Skim(body []byte, f Fields) ([]byte, error) {
	return Compile(f).Append(make([]byte, 0, 512), body)
}

// Table is Fields compiled for lookups by key: the members of an object,
// by the length of their key. Skimming looks up every key of a document;
// a map lookup hashes each, where Table compares the few keys of the same
// length. A Table is read-only once compiled, safe for concurrent use.
type Table struct {
	byLen [][]member
}

// member is a member of a Table: kept whole when sub is nil, skimmed in
// turn by sub when its value is an object.
type member struct {
	key string
	sub *Table
}

// Compile returns the Table of f.
func Compile(f Fields) *Table {
	t := &Table{}
	for key, sub := range f {
		if len(key) >= len(t.byLen) {
			t.byLen = append(t.byLen, make([][]member, len(key)+1-len(t.byLen))...)
		}
		m := member{key: key}
		if sub != nil {
			m.sub = Compile(sub)
		}
		t.byLen[len(key)] = append(t.byLen[len(key)], m)
	}
	return t
}

// lookup returns the member of key, or nil when t does not keep it.
func (t *Table) lookup(key []byte) *member {
	if len(key) >= len(t.byLen) {
		return nil
	}
	ms := t.byLen[len(key)]
	for i := range ms {
		if ms[i].key == string(key) {
			return &ms[i]
		}
	}
	return nil
}

// Append is Skim with t's Fields, appending what it keeps of body to out
// (a buffer the caller reuses) and returning the result; a body that is
// not an object is returned as it is, not appended.
func (t *Table) Append(out, body []byte) ([]byte, error) {
	s := scanners.Get().(*scanner)
	defer func() {
		*s = scanner{}
		scanners.Put(s)
	}()
	s.data = body
	s.ws()
	if s.i >= len(body) || body[s.i] != '{' {
		return body, nil
	}
	out, err := s.skim(out, t)
	if err == nil {
		err = s.end()
	}
	return out, err
}

// scanners keep the scanners of Append: the member functions it gives
// object take one to the heap.
var scanners = sync.Pool{New: func() any { return new(scanner) }}

// skim appends the object at s.i to out, reduced to the members in t.
func (s *scanner) skim(out []byte, t *Table) ([]byte, error) {
	out = append(out, '{')
	first := true
	err := s.object(func(key []byte) error {
		m := t.lookup(key)
		if m == nil {
			return s.skipValue()
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(append(out, '"'), key...), '"', ':') // keys of f are plain JSON tags
		if m.sub != nil && s.data[s.i] == '{' {
			var err error
			out, err = s.skim(out, m.sub)
			return err
		}
		start := s.i
		err := s.skipValue()
		out = append(out, s.data[start:s.i]...)
		return err
	})
	return append(out, '}'), err
}
