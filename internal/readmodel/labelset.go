package readmodel

import (
	"iter"
	"slices"
	"strings"
)

// labelSet is a label set as a Meta keeps it: each key and its value, in
// the order of the keys, each followed by a NUL (neither a label key nor
// a value can hold one: the API server refuses them), in one string.
// Issue 38: a Go map of even one label is about 300 bytes, a labelSet 16
// and its text; the label sets of one object alone (a selector Lock's
// target's) were 39 MB of the heap at 100,000 Locks and a million
// objects (benchmarks.md section 9, run R). A labelSet is read-only, and
// shared between the Metas that repeat it (interner.labels).
type labelSet struct{ text string }

// labelText returns the text of l as a labelSet holds it ("" for none),
// in a buffer of its length: a strings.Builder grown by its writes kept
// up to about twice that (192 bytes for the 113 of a selector Lock's
// target in BenchmarkLockCacheHeap, where its labels are its own).
func labelText(l map[string]string) string {
	if len(l) == 0 {
		return ""
	}
	n, keys := 0, make([]string, 0, len(l))
	for k, v := range l {
		n += len(k) + len(v) + 2
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(n)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(l[k])
		b.WriteByte(0)
	}
	return b.String()
}

// newLabelSet returns the labelSet of l, shared with nothing; nil for no
// labels.
func newLabelSet(l map[string]string) *labelSet {
	if len(l) == 0 {
		return nil
	}
	return &labelSet{text: labelText(l)}
}

// all yields each label of s, in the order of the keys; a nil s has none.
// The strings share s's text.
func (s *labelSet) all() iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		if s == nil {
			return
		}
		for rest := s.text; rest != ""; {
			k, after, _ := strings.Cut(rest, "\x00")
			v, after2, _ := strings.Cut(after, "\x00")
			if !yield(k, v) {
				return
			}
			rest = after2
		}
	}
}

// get returns the value of the label key, and whether s has it.
func (s *labelSet) get(key string) (string, bool) {
	for k, v := range s.all() {
		if k == key {
			return v, true
		}
	}
	return "", false
}

// toMap returns the labels of s as a new map, nil for none.
func (s *labelSet) toMap() map[string]string {
	if s == nil {
		return nil
	}
	m := make(map[string]string, strings.Count(s.text, "\x00")/2)
	for k, v := range s.all() {
		m[k] = v
	}
	return m
}
