package readmodel

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// metaRare holds what few objects of the cache have: lockguard's
// annotations (every target's lock annotation), and what fewer still
// have (metaRest).
type metaRare struct {
	annotations annotationPairs
	rest        *metaRest // nil for none
}

// metaRest is the garbage collector's finalizers, a deletionTimestamp, a
// UID or resourceVersion not in the usual form, owner references other
// than a single one with a canonical UID, and a name not in the Meta's
// allocation (metaname.go): apart from a metaRare, so
// that a target's rare part is 32 bytes, not 112 (issue 38).
type metaRest struct {
	oddIDs
	finalizers        []string
	deletionTimestamp *metav1.Time
	owners            []metav1.OwnerReference
	name              string
}

// odd returns the odd UID and resourceVersion of m's rare part, nil
// when m has none.
func (m *Meta) odd() *oddIDs {
	if m.restOf() == nil {
		return nil
	}
	return &m.restOf().oddIDs
}

// more returns m's rare part, made if m has none.
func (m *Meta) more() *metaRare { return m.edit().more() }

// more returns s's rare part, made if s has none.
func (s *metaShape) more() *metaRare {
	if s.rare == nil {
		s.rare = &metaRare{}
	}
	return s.rare
}

// moreRest returns s's metaRest, made (and its rare part) if s has none.
func (s *metaShape) moreRest() *metaRest {
	r := s.more()
	if r.rest == nil {
		r.rest = &metaRest{}
	}
	return r.rest
}

// moreRest returns m's metaRest, made if m has none.
func (m *Meta) moreRest() *metaRest { return m.edit().moreRest() }

// oddIDs returns the oddIDs of s's metaRest, made if s has none.
func (s *metaShape) oddIDs() *oddIDs { return &s.moreRest().oddIDs }

// rareOf returns m's rare part, nil when it has none.
func (m *Meta) rareOf() *metaRare { return m.shapeOf().rare }

// restOf returns m's metaRest, nil when it has none.
func (m *Meta) restOf() *metaRest {
	if r := m.rareOf(); r != nil {
		return r.rest
	}
	return nil
}
