package webhook

import (
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	k8sjson "sigs.k8s.io/json"
)

// maxNestingDepth is encoding/json's (and sigs.k8s.io/json's) limit on
// the nesting of arrays and objects in a document.
const maxNestingDepth = 10000

// Members of an AdmissionRequest that hold whole objects: they stay slices
// of the body.
const (
	memberObject    = "object"
	memberOldObject = "oldObject"
	memberOptions   = "options"
)

// decodeReview decodes body, an admission.k8s.io/v1 AdmissionReview in
// JSON, into the admission.Request it carries.
//
// It validates the whole body in one pass, as strictly as sigs.k8s.io/json
// (the API server's decoder), keeps the request's object, oldObject and
// options as slices of body, and decodes the other members of the request
// (a few hundred bytes: uid, kind, name, namespace, operation, userInfo,
// dryRun…) with sigs.k8s.io/json, keys matched case-sensitively. The
// objects, megabytes at worst, are thus scanned once and never copied.
func decodeReview(body []byte) (admission.Request, error) {
	s := scanner{data: body}
	var apiVersion, kind []byte
	var request *admissionv1.AdmissionRequest
	err := s.object(func(key []byte, start int) error {
		switch string(key) {
		case "apiVersion", "kind":
			v, err := s.stringValue()
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if string(key) == "kind" {
				kind = v
			} else {
				apiVersion = v
			}
			return nil
		case "request":
			if s.literal("null") {
				request = nil
				return nil
			}
			if request == nil {
				request = &admissionv1.AdmissionRequest{}
			}
			// A second request is decoded into the first, as encoding/json does.
			return s.request(request)
		case "response":
			// Not read, but it must decode, as in the API server's decoder.
			vstart := s.i
			if err := s.skipValue(); err != nil {
				return err
			}
			var resp admissionv1.AdmissionResponse
			return k8sjson.UnmarshalCaseSensitivePreserveInts(body[vstart:s.i], &resp)
		default:
			return s.skipValue()
		}
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return admission.Request{}, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if v := admissionv1.SchemeGroupVersion.String(); string(apiVersion) != v || string(kind) != "AdmissionReview" {
		return admission.Request{}, fmt.Errorf("the body is a %q %q, not an %s AdmissionReview", apiVersion, kind, v)
	}
	if request == nil {
		return admission.Request{}, errors.New("the AdmissionReview has no request")
	}
	return admission.Request{AdmissionRequest: *request}, nil
}

// scanner validates JSON as encoding/json's scanner does (RFC 8259
// grammar, no UTF-8 validation, nesting limited to maxNestingDepth) and
// finds values in it without decoding them.
type scanner struct {
	data  []byte
	i     int
	depth int // arrays and objects open around s.i
	stack []byte
	buf   [64]byte
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

// literal consumes lit (after whitespace) if it is next.
func (s *scanner) literal(lit string) bool {
	s.ws()
	if len(s.data)-s.i >= len(lit) && string(s.data[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// push opens an array or object.
func (s *scanner) push(c byte) error {
	s.depth++
	if s.depth > maxNestingDepth {
		return errors.New("exceeded max depth")
	}
	if s.stack == nil {
		s.stack = s.buf[:0]
	}
	s.stack = append(s.stack, c)
	return nil
}

func (s *scanner) pop() {
	s.depth--
	s.stack = s.stack[:len(s.stack)-1]
}

// object scans an object, calling member for each member with its key
// (unescaped) and the offset where the member starts, when s.i is at the
// member's value (after whitespace); member must consume the value.
func (s *scanner) object(member func(key []byte, start int) error) error {
	s.ws()
	if s.i >= len(s.data) || s.data[s.i] != '{' {
		return s.syntaxError("looking for beginning of object")
	}
	if err := s.push('{'); err != nil {
		return err
	}
	s.i++
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		s.pop()
		return nil
	}
	for {
		s.ws()
		start := s.i
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
		if err := member(key, start); err != nil {
			return err
		}
		if done, err := s.separator('}', "after object key:value pair"); done || err != nil {
			return err
		}
	}
}

// separator scans past what follows an object member or an array element:
// a ',' (done is false) or the closing byte, which pops the nesting level
// (done is true).
func (s *scanner) separator(closing byte, context string) (done bool, err error) {
	s.ws()
	if s.i >= len(s.data) {
		return false, errUnexpectedEnd
	}
	switch s.data[s.i] {
	case ',':
		s.i++
		return false, nil
	case closing:
		s.i++
		s.pop()
		return true, nil
	}
	return false, s.syntaxError(context)
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
	if err := k8sjson.UnmarshalCaseSensitivePreserveInts(raw, &key); err != nil {
		return nil, err
	}
	return []byte(key), nil
}

// stringValue scans a string value and returns it unescaped.
func (s *scanner) stringValue() ([]byte, error) {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return nil, errors.New("not a string")
	}
	return s.key()
}

// str scans a string at s.i and reports whether it holds escapes.
func (s *scanner) str() (escaped bool, err error) {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return false, s.syntaxError("looking for beginning of string")
	}
	s.i++
	for {
		// The fast path: plain bytes.
		for s.i < len(s.data) {
			c := s.data[s.i]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			s.i++
		}
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

// number scans a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() error {
	d := s.data
	if s.i < len(d) && d[s.i] == '-' {
		s.i++
	}
	switch {
	case s.i >= len(d):
		return errUnexpectedEnd
	case d[s.i] == '0':
		s.i++
	case isDigit(d[s.i]):
		for s.i < len(d) && isDigit(d[s.i]) {
			s.i++
		}
	default:
		return s.syntaxError("in numeric literal")
	}
	if s.i < len(d) && d[s.i] == '.' {
		s.i++
		if s.i >= len(d) {
			return errUnexpectedEnd
		}
		if !isDigit(d[s.i]) {
			return s.syntaxError("after decimal point in numeric literal")
		}
		for s.i < len(d) && isDigit(d[s.i]) {
			s.i++
		}
	}
	if s.i < len(d) && (d[s.i] == 'e' || d[s.i] == 'E') {
		s.i++
		if s.i < len(d) && (d[s.i] == '+' || d[s.i] == '-') {
			s.i++
		}
		if s.i >= len(d) {
			return errUnexpectedEnd
		}
		if !isDigit(d[s.i]) {
			return s.syntaxError("in exponent of numeric literal")
		}
		for s.i < len(d) && isDigit(d[s.i]) {
			s.i++
		}
	}
	return nil
}

// skipValue scans one value at s.i (after whitespace), of any depth,
// without recursion.
func (s *scanner) skipValue() error {
	base := len(s.stack)
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
			if len(s.stack) == base {
				return nil
			}
			s.ws()
			if s.i >= len(s.data) {
				return errUnexpectedEnd
			}
			top := s.stack[len(s.stack)-1]
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

// The members of an AdmissionRequest are decoded by hand, field by field,
// as sigs.k8s.io/json would decode them into admissionv1.AdmissionRequest:
// keys matched case-sensitively, unknown members skipped, the last of
// duplicate members winning (objects merged into), null leaving a value
// as it is (setting a pointer, slice or map to nil), and any other type
// mismatch an error. TestDecodeReview and FuzzDecodeReview compare the two.

// request decodes the request object at s.i into r.
func (s *scanner) request(r *admissionv1.AdmissionRequest) error {
	return s.object(func(key []byte, _ int) error {
		var err error
		switch string(key) {
		case "uid":
			err = s.stringInto((*string)(&r.UID))
		case "kind":
			err = s.gvk(&r.Kind)
		case "resource":
			err = s.gvr(&r.Resource)
		case "subResource":
			err = s.stringInto(&r.SubResource)
		case "requestKind":
			if s.literal("null") {
				r.RequestKind = nil
				return nil
			}
			if r.RequestKind == nil {
				r.RequestKind = &metav1.GroupVersionKind{}
			}
			err = s.gvk(r.RequestKind)
		case "requestResource":
			if s.literal("null") {
				r.RequestResource = nil
				return nil
			}
			if r.RequestResource == nil {
				r.RequestResource = &metav1.GroupVersionResource{}
			}
			err = s.gvr(r.RequestResource)
		case "requestSubResource":
			err = s.stringInto(&r.RequestSubResource)
		case "name":
			err = s.stringInto(&r.Name)
		case "namespace":
			err = s.stringInto(&r.Namespace)
		case "operation":
			err = s.stringInto((*string)(&r.Operation))
		case "userInfo":
			err = s.userInfo(&r.UserInfo)
		case "dryRun":
			switch {
			case s.literal("null"):
				r.DryRun = nil
			case s.literal("true"):
				r.DryRun = ptrTo(true)
			case s.literal("false"):
				r.DryRun = ptrTo(false)
			default:
				err = s.typeError("dryRun", "a boolean")
			}
		case memberObject, memberOldObject, memberOptions:
			start := s.i
			if err := s.skipValue(); err != nil {
				return err
			}
			v := s.data[start:s.i]
			if string(v) == "null" {
				return nil // RawExtension ignores null.
			}
			switch string(key) {
			case memberObject:
				r.Object.Raw = v
			case memberOldObject:
				r.OldObject.Raw = v
			default:
				r.Options.Raw = v
			}
		default:
			err = s.skipValue()
		}
		return err
	})
}

func ptrTo[T any](v T) *T { return &v }

// typeError skips the value at s.i and reports that it is not of the type
// of member.
func (s *scanner) typeError(member, want string) error {
	start := s.i
	if err := s.skipValue(); err != nil {
		return err
	}
	return fmt.Errorf("the AdmissionReview's %s is %.20q, not %s", member, s.data[start:s.i], want)
}

// stringInto decodes a string value at s.i into *dst; null leaves it.
func (s *scanner) stringInto(dst *string) error {
	if s.literal("null") {
		return nil
	}
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return s.typeError("member", "a string")
	}
	start := s.i
	escaped, err := s.str()
	if err != nil {
		return err
	}
	raw := s.data[start+1 : s.i-1]
	if !escaped && isASCII(raw) {
		*dst = string(raw)
		return nil
	}
	// Escapes or non-ASCII bytes (invalid UTF-8 becomes U+FFFD): the
	// json package decodes them.
	return k8sjson.UnmarshalCaseSensitivePreserveInts(s.data[start:s.i], dst)
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// gvk decodes a GroupVersionKind object at s.i into dst (merging); null
// leaves it.
func (s *scanner) gvk(dst *metav1.GroupVersionKind) error {
	return s.stringFields("kind", map[string]*string{"group": &dst.Group, "version": &dst.Version, "kind": &dst.Kind})
}

// gvr decodes a GroupVersionResource object at s.i into dst (merging);
// null leaves it.
func (s *scanner) gvr(dst *metav1.GroupVersionResource) error {
	return s.stringFields("resource", map[string]*string{"group": &dst.Group, "version": &dst.Version, "resource": &dst.Resource})
}

// stringFields decodes the object at s.i, the value of member, into the
// strings of fields by key (merging); other keys are skipped, and null
// leaves everything as it is.
func (s *scanner) stringFields(member string, fields map[string]*string) error {
	if s.literal("null") {
		return nil
	}
	if s.i >= len(s.data) || s.data[s.i] != '{' {
		return s.typeError(member, "an object")
	}
	return s.object(func(key []byte, _ int) error {
		if dst, ok := fields[string(key)]; ok {
			return s.stringInto(dst)
		}
		return s.skipValue()
	})
}

// strings decodes an array of strings at s.i into *dst, replacing it; null
// sets it to nil, and a null element is "".
func (s *scanner) strings(dst *[]string) error {
	if s.literal("null") {
		*dst = nil
		return nil
	}
	if s.i >= len(s.data) || s.data[s.i] != '[' {
		return s.typeError("array member", "an array")
	}
	if err := s.push('['); err != nil {
		return err
	}
	s.i++
	out := []string{}
	s.ws()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		s.pop()
		*dst = out
		return nil
	}
	for {
		s.ws()
		var v string
		if err := s.stringInto(&v); err != nil {
			return err
		}
		out = append(out, v)
		done, err := s.separator(']', "after array element")
		if err != nil {
			return err
		}
		if done {
			*dst = out
			return nil
		}
	}
}

// userInfo decodes a UserInfo object at s.i into dst (merging); null
// leaves it.
func (s *scanner) userInfo(dst *authenticationv1.UserInfo) error {
	if s.literal("null") {
		return nil
	}
	if s.i >= len(s.data) || s.data[s.i] != '{' {
		return s.typeError("userInfo", "an object")
	}
	return s.object(func(key []byte, _ int) error {
		switch string(key) {
		case "username":
			return s.stringInto(&dst.Username)
		case "uid":
			return s.stringInto(&dst.UID)
		case "groups":
			return s.strings(&dst.Groups)
		case "extra":
			if s.literal("null") {
				dst.Extra = nil
				return nil
			}
			if s.i >= len(s.data) || s.data[s.i] != '{' {
				return s.typeError("userInfo.extra", "an object")
			}
			if dst.Extra == nil {
				dst.Extra = map[string]authenticationv1.ExtraValue{}
			}
			return s.object(func(key []byte, _ int) error {
				var v []string
				if err := s.strings(&v); err != nil {
					return err
				}
				dst.Extra[string(key)] = v
				return nil
			})
		}
		return s.skipValue()
	})
}
