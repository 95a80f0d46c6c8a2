package cachestore

import (
	"hash/maphash"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// nameSeed makes where a name lands in a nameTable unpredictable from
// outside the process, so that whoever names objects cannot pile them
// onto one run of slots.
var nameSeed = maphash.MakeSeed()

// nameTable is a namespace's objects in a Store, by name: an
// open-addressing hash table (linear probing, deletion by shifting back)
// of the objects themselves. It keeps no key: a slot is compared by its
// object's name. 16 bytes a slot, at most three quarters full (a Go map of
// name to object takes 32 a slot, and a table of its own per namespace;
// issue 38). The zero value is empty.
type nameTable struct {
	slots []metav1.Object // a power of two long, or none
	n     int
}

// nameTableMin is a nameTable's smallest length.
const nameTableMin = 8

func (t *nameTable) home(name string) int {
	return int(maphash.String(nameSeed, name) & uint64(len(t.slots)-1))
}

// find returns the slot of name, or the empty slot where it would go.
func (t *nameTable) find(name string) (int, bool) {
	mask := len(t.slots) - 1
	for i := t.home(name); ; i = (i + 1) & mask {
		switch o := t.slots[i]; {
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
		return t.slots[i]
	}
	return nil
}

// put stores o in place of the object of its name, and returns that
// object (nil for none).
func (t *nameTable) put(o metav1.Object) metav1.Object {
	if (t.n+1)*4 > len(t.slots)*3 {
		t.resize(max(nameTableMin, 2*len(t.slots)))
	}
	i, ok := t.find(o.GetName())
	old := t.slots[i]
	t.slots[i] = o
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
	old := t.slots[i]
	mask := len(t.slots) - 1
	// Shift back each object after i, up to an empty slot, that its
	// probe from its home slot would not find past the gap.
	for j := (i + 1) & mask; t.slots[j] != nil; j = (j + 1) & mask {
		k := t.home(t.slots[j].GetName())
		if (i <= j && (i < k && k <= j)) || (i > j && (i < k || k <= j)) {
			continue // k is in (i, j], cyclically: found before the gap
		}
		t.slots[i] = t.slots[j]
		i = j
	}
	t.slots[i] = nil
	t.n--
	if t.n*8 < len(t.slots) && len(t.slots) > nameTableMin {
		t.resize(len(t.slots) / 2)
	}
	return old
}

// resize moves the objects into a table size long.
func (t *nameTable) resize(size int) {
	objs := t.slots
	t.slots = make([]metav1.Object, size)
	for _, o := range objs {
		if o != nil {
			i, _ := t.find(o.GetName())
			t.slots[i] = o
		}
	}
}

// each calls fn with each object.
func (t *nameTable) each(fn func(metav1.Object)) {
	for _, o := range t.slots {
		if o != nil {
			fn(o)
		}
	}
}
