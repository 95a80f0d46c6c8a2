package webhook

import (
	"bytes"

	k8sjson "sigs.k8s.io/json"

	"github.com/navique/lockguard/internal/skim"
)

// ObjectSpec is what the CRD guard reads of the spec of the object being
// deleted: a CustomResourceDefinition's group and kind. Its decoding is
// lenient: the spec of another kind, whose members can have any shape
// (or which need not be an object at all), decodes to what it can read and
// never fails the review, so that the object guard decides as before.
type ObjectSpec struct {
	Group string    `json:"group"`
	Names SpecNames `json:"names"`
}

// SpecNames is what the CRD guard reads of a CustomResourceDefinition's
// spec.names.
type SpecNames struct {
	Kind string `json:"kind"`
}

// ObjectStatus is what the namespace guard reads of the status of the
// object being deleted: a Namespace's phase. Its decoding is lenient, as
// ObjectSpec's.
type ObjectStatus struct {
	Phase string `json:"phase"`
}

// SkimFields are the members UnmarshalJSON reads (skim.Lenient): the
// skimmer keeps only these of a spec.
func (ObjectSpec) SkimFields() skim.Fields {
	return skim.Fields{"group": nil, "names": skim.Fields{"kind": nil}}
}

// SkimFields are the members UnmarshalJSON reads (skim.Lenient).
func (ObjectStatus) SkimFields() skim.Fields { return skim.Fields{"phase": nil} }

// UnmarshalJSON reads the members of ObjectSpec it can, and ignores the rest.
func (s *ObjectSpec) UnmarshalJSON(data []byte) error {
	var v struct {
		Group any `json:"group"`
		Names any `json:"names"`
	}
	*s = ObjectSpec{}
	if !isObject(data) || k8sjson.UnmarshalCaseSensitivePreserveInts(data, &v) != nil {
		return nil
	}
	s.Group, _ = v.Group.(string)
	if names, ok := v.Names.(map[string]any); ok {
		s.Names.Kind, _ = names["kind"].(string)
	}
	return nil
}

// UnmarshalJSON reads the members of ObjectStatus it can, and ignores the
// rest.
func (s *ObjectStatus) UnmarshalJSON(data []byte) error {
	var v struct {
		Phase any `json:"phase"`
	}
	*s = ObjectStatus{}
	if !isObject(data) || k8sjson.UnmarshalCaseSensitivePreserveInts(data, &v) != nil {
		return nil
	}
	s.Phase, _ = v.Phase.(string)
	return nil
}

// isObject reports whether data, a JSON value, is an object.
func isObject(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	return len(data) > 0 && data[0] == '{'
}
