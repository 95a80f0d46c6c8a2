package cachestore

import (
	"hash/maphash"
	"math/bits"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nameSeed makes where a name lands in a nameTable unpredictable from
// outside the process, so that whoever names objects cannot pile them
// onto one run of slots.
var nameSeed = maphash.MakeSeed()

// nameTable is a namespace's objects in a Store, by name: an
// open-addressing hash table (linear probing, deletion by shifting back)
// of the objects themselves. It keeps no key: a slot is compared by its
// object's name. A slot is 8 bytes while the table's objects are all of
// one type (a Store's are: the informer's transform makes them so): the
// object's pointer, the type kept once (its interface's type word, tab);
// 16, an interface, once a second type comes (wide). The table is at
// most three quarters full and grows by half (a Go map of name to object
// takes 32 bytes a slot, and a table of its own per namespace; issue 38).
// The zero value is empty.
type nameTable struct {
	slots []unsafe.Pointer // the objects' pointers; none once wide
	tab   unsafe.Pointer   // the type word of slots' objects
	wide  []metav1.Object  // every slot, once objects of two types came
	n     int
}

// nameTableMin is a nameTable's smallest length.
const nameTableMin = 8

// iface is a Go interface value as the runtime lays it out: its type word
// and its pointer.
type iface struct{ tab, data unsafe.Pointer }

// words returns o's type word and pointer.
func words(o metav1.Object) iface { return *(*iface)(unsafe.Pointer(&o)) }

// fromWords returns the object of type word and pointer w.
func fromWords(w iface) metav1.Object {
	var o metav1.Object
	*(*iface)(unsafe.Pointer(&o)) = w
	return o
}

// len returns the number of slots.
func (t *nameTable) len() int {
	if t.wide != nil {
		return len(t.wide)
	}
	return len(t.slots)
}

// at returns the object in slot i, nil for none.
func (t *nameTable) at(i int) metav1.Object {
	if t.wide != nil {
		return t.wide[i]
	}
	if t.slots[i] == nil {
		return nil
	}
	return fromWords(iface{tab: t.tab, data: t.slots[i]})
}

// set puts o (nil for none) in slot i: the table widens when o is of
// another type than its objects.
func (t *nameTable) set(i int, o metav1.Object) {
	var w iface
	if t.wide == nil && o != nil {
		switch w = words(o); {
		case t.n == 0:
			t.tab = w.tab
		case t.tab != w.tab:
			t.widen()
		}
	}
	if t.wide != nil {
		t.wide[i] = o
		return
	}
	t.slots[i] = w.data
}

// widen makes every slot an interface.
func (t *nameTable) widen() {
	wide := make([]metav1.Object, len(t.slots))
	for i := range t.slots {
		wide[i] = t.at(i)
	}
	t.wide, t.slots = wide, nil
}

func (t *nameTable) home(name string) int {
	hi, _ := bits.Mul64(maphash.String(nameSeed, name), uint64(t.len()))
	return int(hi)
}

// next returns the slot after i, cyclically.
func (t *nameTable) next(i int) int {
	if i++; i == t.len() {
		return 0
	}
	return i
}

// find returns the slot of name, or the empty slot where it would go.
func (t *nameTable) find(name string) (int, bool) {
	for i := t.home(name); ; i = t.next(i) {
		switch o := t.at(i); {
		case o == nil:
			return i, false
		case o.GetName() == name:
			return i, true
		}
	}
}

// get returns the object named name, nil for none.
func (t *nameTable) get(name string) metav1.Object {
	if t.n == 0 {
		return nil
	}
	if i, ok := t.find(name); ok {
		return t.at(i)
	}
	return nil
}

// put stores o in place of the object of its name, and returns that
// object (nil for none).
func (t *nameTable) put(o metav1.Object) metav1.Object {
	if (t.n+1)*4 > t.len()*3 {
		t.resize(max(nameTableMin, t.len()+t.len()/2))
	}
	i, ok := t.find(o.GetName())
	old := t.at(i)
	t.set(i, o)
	if !ok {
		t.n++
	}
	return old
}

// remove removes the object named name and returns it (nil for none).
func (t *nameTable) remove(name string) metav1.Object {
	if t.n == 0 {
		return nil
	}
	i, ok := t.find(name)
	if !ok {
		return nil
	}
	old := t.at(i)
	// Shift back each object after i, up to an empty slot, that its
	// probe from its home slot would not find past the gap.
	for j := t.next(i); t.at(j) != nil; j = t.next(j) {
		k := t.home(t.at(j).GetName())
		if (i <= j && (i < k && k <= j)) || (i > j && (i < k || k <= j)) {
			continue // k is in (i, j], cyclically: found before the gap
		}
		t.set(i, t.at(j))
		i = j
	}
	t.set(i, nil)
	t.n--
	if t.n*8 < t.len() && t.len() > nameTableMin {
		t.resize(max(nameTableMin, t.len()/2))
	}
	return old
}

// resize moves the objects into a table size long.
func (t *nameTable) resize(size int) {
	old := *t
	if t.wide != nil {
		t.wide = make([]metav1.Object, size)
	} else {
		t.slots = make([]unsafe.Pointer, size)
	}
	old.each(func(o metav1.Object) {
		i, _ := t.find(o.GetName())
		t.set(i, o)
	})
}

// each calls fn with each object.
func (t *nameTable) each(fn func(metav1.Object)) {
	for i := range t.len() {
		if o := t.at(i); o != nil {
			fn(o)
		}
	}
}

// appendTo appends each object to dst.
func (t *nameTable) appendTo(dst []any) []any {
	for i := range t.len() {
		if o := t.at(i); o != nil {
			dst = append(dst, o)
		}
	}
	return dst
}
