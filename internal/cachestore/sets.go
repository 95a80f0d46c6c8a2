package cachestore

import (
	"slices"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// smallSet is the most objects an objectSet keeps in a slice: past it, a
// map (a search of a slice that long is still a few cache lines).
const smallSet = 32

// objectSet is the objects a Store's index holds under one value, each as
// an E (setIndex): in a slice of exactly their number while they are few
// (an owner's objects, usually: 8 bytes each as pointers, where a Go map
// of nine takes about 40 each), in a map beyond smallSet. The zero value
// is empty.
type objectSet[E comparable] struct {
	few  []E
	many map[E]struct{}
}

// add adds o, if the set does not hold it.
func (s *objectSet[E]) add(o E) {
	if s.many != nil {
		s.many[o] = struct{}{}
		return
	}
	if slices.Contains(s.few, o) {
		return
	}
	if len(s.few) == smallSet {
		s.many = make(map[E]struct{}, smallSet+1)
		for _, x := range s.few {
			s.many[x] = struct{}{}
		}
		s.many[o] = struct{}{}
		s.few = nil
		return
	}
	few := make([]E, len(s.few)+1)
	copy(few, s.few)
	few[len(s.few)] = o
	s.few = few
}

// remove removes o, if the set holds it.
func (s *objectSet[E]) remove(o E) {
	if s.many != nil {
		delete(s.many, o)
		return
	}
	i := slices.Index(s.few, o)
	if i < 0 {
		return
	}
	few := make([]E, 0, len(s.few)-1)
	s.few = append(append(few, s.few[:i]...), s.few[i+1:]...)
}

// swap puts o in old's place and reports true, or reports false (the set
// unchanged) when the set does not hold old or holds o already.
func (s *objectSet[E]) swap(old, o E) bool {
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
func (s *objectSet[E]) len() int { return len(s.few) + len(s.many) }

// each calls fn with each object of the set.
func (s *objectSet[E]) each(fn func(E)) {
	for _, o := range s.few {
		fn(o)
	}
	for o := range s.many {
		fn(o)
	}
}

// index is one index of a Store other than the namespace index it serves
// from its name tables: its objects by value.
type index interface {
	// add adds o under v.
	add(v string, o metav1.Object)
	// remove removes o from under v.
	remove(v string, o metav1.Object)
	// swap puts o in old's place under v (objectSet.swap).
	swap(v string, old, o metav1.Object) bool
	// each calls fn with the objects under v.
	each(v string, fn func(metav1.Object))
	// appendTo appends the objects under v to dst: each without a func,
	// which, called through the interface, would escape with what it
	// captures (two allocations a lookup).
	appendTo(dst []any, v string) []any
	// values calls fn with each value that holds objects.
	values(fn func(string))
}

// setIndex is an index whose objectSets hold each object as an E: its
// pointer while a Store's objects are all of one type (narrowIndex: they
// are, the informer's transform makes them so), the object itself once a
// second type came (wideIndex). A value that is a UUID in canonical form
// (ParseUUID: an owner's UID, every value of the owner index) is kept as
// its 16 bytes, the others as strings.
type setIndex[E comparable] struct {
	byUID   map[[16]byte]objectSet[E]
	byValue map[string]objectSet[E]
	elem    func(metav1.Object) E
	object  func(E) metav1.Object
}

// narrowIndex returns an empty index of objects whose type word is
// *tab: 8 bytes an object.
func narrowIndex(tab *unsafe.Pointer) index {
	return &setIndex[unsafe.Pointer]{byUID: map[[16]byte]objectSet[unsafe.Pointer]{}, byValue: map[string]objectSet[unsafe.Pointer]{},
		elem:   func(o metav1.Object) unsafe.Pointer { return words(o).data },
		object: func(p unsafe.Pointer) metav1.Object { return fromWords(iface{tab: *tab, data: p}) }}
}

// wideIndex returns an empty index of objects of any type: 16 bytes an
// object.
func wideIndex() index {
	return &setIndex[metav1.Object]{byUID: map[[16]byte]objectSet[metav1.Object]{}, byValue: map[string]objectSet[metav1.Object]{},
		elem: func(o metav1.Object) metav1.Object { return o }, object: func(o metav1.Object) metav1.Object { return o }}
}

// update calls fn with the set under v, and keeps it there, or drops it
// when fn leaves it empty.
func (x *setIndex[E]) update(v string, fn func(*objectSet[E])) {
	if id, ok := ParseUUID(v); ok {
		set := x.byUID[id]
		if fn(&set); set.len() == 0 {
			delete(x.byUID, id)
		} else {
			x.byUID[id] = set
		}
		return
	}
	set := x.byValue[v]
	if fn(&set); set.len() == 0 {
		delete(x.byValue, v)
	} else {
		x.byValue[v] = set
	}
}

func (x *setIndex[E]) add(v string, o metav1.Object) {
	x.update(v, func(s *objectSet[E]) { s.add(x.elem(o)) })
}

func (x *setIndex[E]) remove(v string, o metav1.Object) {
	x.update(v, func(s *objectSet[E]) { s.remove(x.elem(o)) })
}

func (x *setIndex[E]) swap(v string, old, o metav1.Object) (swapped bool) {
	x.update(v, func(s *objectSet[E]) { swapped = s.swap(x.elem(old), x.elem(o)) })
	return swapped
}

// set returns the set under v.
func (x *setIndex[E]) set(v string) objectSet[E] {
	if id, ok := ParseUUID(v); ok {
		return x.byUID[id]
	}
	return x.byValue[v]
}

func (x *setIndex[E]) each(v string, fn func(metav1.Object)) {
	set := x.set(v)
	set.each(func(e E) { fn(x.object(e)) })
}

func (x *setIndex[E]) appendTo(dst []any, v string) []any {
	set := x.set(v)
	for _, e := range set.few {
		dst = append(dst, x.object(e))
	}
	for e := range set.many {
		dst = append(dst, x.object(e))
	}
	return dst
}

func (x *setIndex[E]) values(fn func(string)) {
	for id := range x.byUID {
		fn(FormatUUID(id))
	}
	for v := range x.byValue {
		fn(v)
	}
}

// typed takes o's type as the Store's, if it is the first object put;
// when o is of another type than the Store's, every index becomes wide,
// indexed again from the objects.
func (s *Store) typed(o metav1.Object) {
	switch w := words(o); {
	case s.wide || w.tab == s.tab:
		return
	case s.tab == nil:
		s.tab = w.tab
		return
	}
	s.wide = true
	for name := range s.indices {
		s.indices[name] = wideIndex()
	}
	for _, ns := range s.objects {
		ns.each(func(x metav1.Object) { s.reindexLocked(s.indexers, nil, x) })
	}
}

// newIndex returns an empty index for the Store's objects.
func (s *Store) newIndex() index {
	if s.wide {
		return wideIndex()
	}
	return narrowIndex(&s.tab)
}
