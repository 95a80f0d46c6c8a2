package readmodel

import (
	"hash/maphash"
	"sync"
)

// Bounds of an interner: past them it starts afresh (the objects keep what
// they were given), so that what it holds beyond the cache's objects stays
// under about internStrings short strings and internLabelSets label sets,
// whatever the cluster holds.
const (
	internStrings   = 1 << 16
	internLabelSets = 1 << 13
)

// interner shares the strings and label sets that many cached objects
// repeat (a Meta's labels, owner references, a Lock's repeated strings),
// so that the cache holds each once (issue 38: a label set of three costs
// about 400 bytes per object as a map, a shared one nothing). What it
// hands out is shared between objects: like every object in the cache,
// it is read-only. Safe for concurrent use: the informers of every kind
// share the cache's transform.
type interner struct {
	mu      sync.Mutex
	strings map[string]string
	sets    map[string]*labelSet // a Meta's labels
	kinds   map[ownerKind]*ownerKind
	spaces  map[string]*string // namespaces
	// owners holds the owner references seen last, by their UID: the
	// objects an owner owns are usually listed and changed together (an
	// owner and what it owns share a namespace), so that they share one,
	// without the interner holding every owner's.
	owners [ownerSlots]*ownerRef
	// shapes holds the Metas' shapes seen last, by their namespace, labels
	// and owner, as owners the owner references.
	shapes [ownerSlots]*metaShape
	seed   maphash.Seed
}

// ownerSlots is the number of owner references, and of Metas' shapes, an
// interner remembers.
const ownerSlots = 1 << 12

func newInterner() *interner {
	return &interner{strings: map[string]string{}, sets: map[string]*labelSet{}, kinds: map[ownerKind]*ownerKind{}, spaces: map[string]*string{}, seed: maphash.MakeSeed()}
}

// ownerKind returns an owner reference's apiVersion and kind, shared with
// every reference that repeats them.
func (n *interner) ownerKind(apiVersion, kind string) *ownerKind {
	n.mu.Lock()
	defer n.mu.Unlock()
	return sharedIn(n.kinds, ownerKind{apiVersion: apiVersion, kind: kind}, internStrings, func() *ownerKind {
		return &ownerKind{apiVersion: n.stringLocked(apiVersion), kind: n.stringLocked(kind)}
	})
}

// namespacePtr returns a pointer to namespace, nil for "", shared through
// shared (when not nil) with every object of the namespace.
func namespacePtr(namespace string, shared *interner) *string {
	if namespace == "" {
		return nil
	}
	if shared == nil {
		return &namespace
	}
	shared.mu.Lock()
	defer shared.mu.Unlock()
	return sharedIn(shared.spaces, namespace, internStrings, func() *string { return new(shared.stringLocked(namespace)) })
}

// ownerRef returns an owner reference to uid, of that apiVersion, kind and
// name: one handed out lately, or a new one (its apiVersion and kind
// shared, ownerKind).
func (n *interner) ownerRef(apiVersion, kind, name string, uid [16]byte) *ownerRef {
	r := ownerRef{ownerKind: n.ownerKind(apiVersion, kind), name: name, uid: uid}
	return recent(n, &n.owners, maphash.Bytes(n.seed, uid[:]), r)
}

// shape returns a shape equal to s: nil for the empty one; a new one when
// s has a rare part (its Meta's own) or n is nil; otherwise one handed out
// lately with the same namespace, labels and owner (the objects an owner
// owns, or a namespace's unowned objects with the same labels, come
// together in a list), or a new one.
func (n *interner) shape(s metaShape) *metaShape {
	if s == (metaShape{}) {
		return nil
	}
	if s.rare != nil || n == nil {
		p := new(metaShape)
		*p = s
		return p
	}
	return recent(n, &n.shapes, maphash.Comparable(n.seed, s), s)
}

// recent returns the value equal to v that slots holds at hash, or a new
// copy of v, which then takes that slot: a cache of the values handed out
// lately, as many as slots has (ownerSlots), whatever the cluster holds.
func recent[T comparable](n *interner, slots *[ownerSlots]*T, hash uint64, v T) *T {
	slot := &slots[hash&(ownerSlots-1)]
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := *slot; p != nil && *p == v {
		return p
	}
	p := new(T)
	*p = v
	*slot = p
	return p
}

// string returns s, or an equal string handed out before.
func (n *interner) string(s string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stringLocked(s)
}

func (n *interner) stringLocked(s string) string {
	return sharedIn(n.strings, s, internStrings, func() string { return s })
}

// sharedIn returns m's value for k, or, when m has none, the value newV
// makes, stored in m under k (m emptied first when it holds limit values:
// see the interner's bounds). The caller holds the interner's mutex.
func sharedIn[K comparable, V any](m map[K]V, k K, limit int, newV func() V) V {
	if v, ok := m[k]; ok {
		return v
	}
	if len(m) >= limit {
		clear(m)
	}
	v := newV()
	m[k] = v
	return v
}

// labelSet returns the labelSet of l, one handed out before when it has
// the same labels; nil for no labels.
func (n *interner) labelSet(l map[string]string) *labelSet {
	if len(l) == 0 {
		return nil
	}
	text := labelText(l)
	n.mu.Lock()
	defer n.mu.Unlock()
	return sharedIn(n.sets, text, internLabelSets, func() *labelSet { return &labelSet{text: text} })
}
