package webhook

import (
	"encoding/json"
	"reflect"
	"strings"
)

// The fast path of decodeReview: skim copies out of a review the members
// that Request has a field for, validating and skipping the rest (above
// all oldObject's spec and status, up to megabytes) without decoding it,
// so that the standard decoder reads a few hundred bytes whatever the size
// of the objects. Only skipping is hand-written; every kept value is
// decoded by sigs.k8s.io/json. FuzzDecodeReview checks that the fast path
// and the standard decode of the whole body agree on every input.

// fields are the members of a JSON object that a Go type reads: a member
// mapped to nil is kept whole, one mapped to fields is skimmed in turn
// when its value is an object.
type fields map[string]fields

// reviewFields are the members decodeReview reads.
var reviewFields = fieldsOf(reflect.TypeFor[review]())

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	lenientType     = reflect.TypeFor[lenient]()
)

// fieldsOf returns the members that the standard decoder reads into a
// value of type t, or nil (keep the value whole) when t is not a plain
// struct: keeping a value whole is always correct, only slower.
func fieldsOf(t reflect.Type) fields {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Implements(lenientType) {
		// Its UnmarshalJSON reads only these members, whatever the rest.
		return reflect.Zero(t).Interface().(lenient).skimFields()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	f := fields{}
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
		f[name] = fieldsOf(sf.Type)
	}
	return f
}

// skim returns the JSON document body reduced to the members in f (at
// every level), in their order, duplicates included, so that the standard
// decoder reads the same values from it as from body. It validates what it
// drops as strictly as encoding/json: RFC 8259 grammar, no UTF-8
// validation, nesting limited to maxNestingDepth. A body that is not an
// object is returned as it is.
func skim(body []byte, f fields) ([]byte, error) {
	s := &scanner{data: body}
	s.ws()
	if s.i >= len(body) || body[s.i] != '{' {
		return body, nil
	}
	out, err := s.skim(make([]byte, 0, 512), f)
	if err == nil {
		err = s.end()
	}
	return out, err
}

// skim appends the object at s.i to out, reduced to the members in f.
func (s *scanner) skim(out []byte, f fields) ([]byte, error) {
	out = append(out, '{')
	first := true
	err := s.object(func(key []byte) error {
		sub, keep := f[string(key)]
		if !keep {
			return s.skipValue()
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(append(out, '"'), key...), '"', ':') // keys of f are plain JSON tags
		if sub != nil && s.data[s.i] == '{' {
			var err error
			out, err = s.skim(out, sub)
			return err
		}
		start := s.i
		err := s.skipValue()
		out = append(out, s.data[start:s.i]...)
		return err
	})
	return append(out, '}'), err
}
