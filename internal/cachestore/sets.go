package cachestore

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// smallSet is the most objects an objectSet keeps in a slice: past it, a
// map (a search of a slice that long is still a few cache lines).
const smallSet = 32

// objectSet is the objects a Store's index holds under one value: in a
// slice of exactly their number while they are few (an owner's objects,
// usually: 16 bytes each, where a Go map of nine takes about 40 each),
// in a map beyond smallSet. The zero value is empty.
type objectSet struct {
	few  []metav1.Object
	many map[metav1.Object]struct{}
}

// add adds o, if the set does not hold it.
func (s *objectSet) add(o metav1.Object) {
	if s.many != nil {
		s.many[o] = struct{}{}
		return
	}
	if slices.Contains(s.few, o) {
		return
	}
	if len(s.few) == smallSet {
		s.many = make(map[metav1.Object]struct{}, smallSet+1)
		for _, x := range s.few {
			s.many[x] = struct{}{}
		}
		s.many[o] = struct{}{}
		s.few = nil
		return
	}
	few := make([]metav1.Object, len(s.few)+1)
	copy(few, s.few)
	few[len(s.few)] = o
	s.few = few
}

// remove removes o, if the set holds it.
func (s *objectSet) remove(o metav1.Object) {
	if s.many != nil {
		delete(s.many, o)
		return
	}
	i := slices.Index(s.few, o)
	if i < 0 {
		return
	}
	few := make([]metav1.Object, 0, len(s.few)-1)
	s.few = append(append(few, s.few[:i]...), s.few[i+1:]...)
}

// swap puts o in old's place and reports true, or reports false (the set
// unchanged) when the set does not hold old or holds o already.
func (s *objectSet) swap(old, o metav1.Object) bool {
	if s.many != nil {
		if _, ok := s.many[old]; !ok {
			return false
		}
		if _, ok := s.many[o]; ok && o != old {
			return false
		}
		delete(s.many, old)
		s.many[o] = struct{}{}
		return true
	}
	i := slices.Index(s.few, old)
	if i < 0 || (o != old && slices.Contains(s.few, o)) {
		return false
	}
	s.few[i] = o
	return true
}

// len returns the number of objects in the set.
func (s *objectSet) len() int { return len(s.few) + len(s.many) }

// each calls fn with each object of the set.
func (s *objectSet) each(fn func(metav1.Object)) {
	for _, o := range s.few {
		fn(o)
	}
	for o := range s.many {
		fn(o)
	}
}
