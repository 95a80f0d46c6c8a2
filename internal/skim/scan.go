package skim

import (
	"errors"
	"fmt"

	k8sjson "sigs.k8s.io/json"
)

// maxNestingDepth is encoding/json's (and sigs.k8s.io/json's) limit on
// the nesting of arrays and objects in a document.
const maxNestingDepth = 10000

// scanner validates JSON as encoding/json's scanner does and finds values
// in it without decoding them.
type scanner struct {
	data []byte
	i    int
	// open is the number of arrays and objects open around s.i: the
	// kind ('{' or '[') of the first len(first) is in first, of the rest
	// in more. (No slice of first: a scanner on a caller's stack stays
	// there.)
	open  int
	first [64]byte
	more  []byte
	outer int // arrays and objects open around data (Skip's depth)
}

var errUnexpectedEnd = errors.New("unexpected end of JSON input")

func (s *scanner) syntaxError(what string) error {
	if s.i >= len(s.data) {
		return errUnexpectedEnd
	}
	return fmt.Errorf("invalid character %q %s at offset %d", s.data[s.i], what, s.i)
}

// ws skips whitespace.
func (s *scanner) ws() {
	if s.i < len(s.data) && s.data[s.i] > ' ' {
		return // the common case: no whitespace at all
	}
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// end checks that only whitespace follows the top-level value.
func (s *scanner) end() error {
	s.ws()
	if s.i < len(s.data) {
		return s.syntaxError("after top-level value")
	}
	return nil
}

// literal consumes lit if it is next.
func (s *scanner) literal(lit string) bool {
	if len(s.data)-s.i >= len(lit) && string(s.data[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// push opens an array or object.
func (s *scanner) push(c byte) error {
	if s.outer+s.open >= maxNestingDepth {
		return errors.New("exceeded max depth")
	}
	if s.open < len(s.first) {
		s.first[s.open] = c
	} else {
		s.more = append(s.more[:s.open-len(s.first)], c)
	}
	s.open++
	return nil
}

func (s *scanner) pop() { s.open-- }

// top is the kind of the innermost open array or object.
func (s *scanner) top() byte {
	if s.open <= len(s.first) {
		return s.first[s.open-1]
	}
	return s.more[s.open-1-len(s.first)]
}

// object scans the object at s.i, calling member for each member with its
// key (unescaped) when s.i is at the member's value (after whitespace);
// member must consume the value.
func (s *scanner) object(member func(key []byte) error) error {
	if err := s.push('{'); err != nil {
		return err
	}
	s.i++ // '{'
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		s.pop()
		return nil
	}
	for {
		s.ws()
		key, err := s.key()
		if err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return s.syntaxError("after object key")
		}
		s.i++
		s.ws()
		if s.i >= len(s.data) {
			return errUnexpectedEnd
		}
		if err := member(key); err != nil {
			return err
		}
		s.ws()
		if s.i >= len(s.data) {
			return errUnexpectedEnd
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.pop()
			return nil
		default:
			return s.syntaxError("after object key:value pair")
		}
	}
}

// key scans a string and returns its unescaped value.
func (s *scanner) key() ([]byte, error) {
	start := s.i
	escaped, err := s.str()
	if err != nil {
		return nil, err
	}
	raw := s.data[start:s.i]
	if !escaped {
		return raw[1 : len(raw)-1], nil
	}
	var key string
	err = k8sjson.UnmarshalCaseSensitivePreserveInts(raw, &key)
	return []byte(key), err
}

// str scans a string at s.i and reports whether it holds escapes.
func (s *scanner) str() (escaped bool, err error) {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return false, s.syntaxError("looking for beginning of object key string")
	}
	s.i++
	for {
		s.i = plainRun(s.data, s.i)
		if s.i >= len(s.data) {
			return false, errUnexpectedEnd
		}
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return escaped, nil
		case c < 0x20:
			return false, s.syntaxError("in string literal")
		}
		// A backslash.
		escaped = true
		s.i++
		if s.i >= len(s.data) {
			return false, errUnexpectedEnd
		}
		switch s.data[s.i] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			s.i++
		case 'u':
			s.i++
			for range 4 {
				if s.i >= len(s.data) {
					return false, errUnexpectedEnd
				}
				if !isHex(s.data[s.i]) {
					return false, s.syntaxError("in \\u hexadecimal character escape")
				}
				s.i++
			}
		default:
			return false, s.syntaxError("in string escape code")
		}
	}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// digits scans one or more digits.
func (s *scanner) digits(what string) error {
	if s.i >= len(s.data) {
		return errUnexpectedEnd
	}
	if !isDigit(s.data[s.i]) {
		return s.syntaxError(what)
	}
	for s.i < len(s.data) && isDigit(s.data[s.i]) {
		s.i++
	}
	return nil
}

// number scans a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	d := s.data
	if d[s.i] == '-' {
		s.i++
	}
	if s.i < len(d) && d[s.i] == '0' {
		s.i++
	} else if err := s.digits("in numeric literal"); err != nil {
		return err
	}
	if s.i < len(d) && d[s.i] == '.' {
		s.i++
		if err := s.digits("after decimal point in numeric literal"); err != nil {
			return err
		}
	}
	if s.i < len(d) && (d[s.i] == 'e' || d[s.i] == 'E') {
		s.i++
		if s.i < len(d) && (d[s.i] == '+' || d[s.i] == '-') {
			s.i++
		}
		if err := s.digits("in exponent of numeric literal"); err != nil {
			return err
		}
	}
	return nil
}

// skipValue scans one value at s.i (after whitespace), of any depth,
// without recursion.
func (s *scanner) skipValue() error {
	base := s.open
	for {
		// A value.
		s.ws()
		if s.i >= len(s.data) {
			return errUnexpectedEnd
		}
		switch c := s.data[s.i]; {
		case c == '{' || c == '[':
			if err := s.push(c); err != nil {
				return err
			}
			s.i++
			s.ws()
			if s.i < len(s.data) && s.data[s.i] == c+2 { // '}' or ']'
				s.i++
				s.pop()
				break
			}
			if c == '{' {
				if err := s.memberKey(); err != nil {
					return err
				}
			}
			continue // the first element or member value
		case c == '"':
			if _, err := s.str(); err != nil {
				return err
			}
		case c == '-' || isDigit(c):
			if err := s.number(); err != nil {
				return err
			}
		case c == 't':
			if !s.literal("true") {
				return s.syntaxError("in literal true (expecting 'r')")
			}
		case c == 'f':
			if !s.literal("false") {
				return s.syntaxError("in literal false (expecting 'a')")
			}
		case c == 'n':
			if !s.literal("null") {
				return s.syntaxError("in literal null (expecting 'u')")
			}
		default:
			return s.syntaxError("looking for beginning of value")
		}
		// After a value: close containers, or go on to the next element.
		for {
			if s.open == base {
				return nil
			}
			s.ws()
			if s.i >= len(s.data) {
				return errUnexpectedEnd
			}
			top := s.top()
			c := s.data[s.i]
			if c == top+2 { // '}' or ']'
				s.i++
				s.pop()
				continue
			}
			if c != ',' {
				if top == '{' {
					return s.syntaxError("after object key:value pair")
				}
				return s.syntaxError("after array element")
			}
			s.i++
			if top == '{' {
				s.ws()
				if err := s.memberKey(); err != nil {
					return err
				}
			}
			break
		}
	}
}

// memberKey scans `"key" :` inside an object.
func (s *scanner) memberKey() error {
	if _, err := s.str(); err != nil {
		return err
	}
	s.ws()
	if s.i >= len(s.data) || s.data[s.i] != ':' {
		return s.syntaxError("after object key")
	}
	s.i++
	return nil
}
