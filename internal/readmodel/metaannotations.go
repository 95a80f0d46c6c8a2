package readmodel

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// annotationPairs are a Meta's annotations as key, value, key, value…,
// sorted by key: a Meta keeps at most the few annotations CacheTransform
// keeps (cachedAnnotations), and a slice of them is a quarter of a map's
// size (issue 38: the lock annotation of every target, a map of one entry,
// cost about 300 bytes). A key that is one of cachedAnnotations is that
// constant, not a copy.
type annotationPairs []string

// pairsOf returns a's annotations as pairs; nil for none.
func pairsOf(a map[string]string) annotationPairs {
	if len(a) == 0 {
		return nil
	}
	p := make(annotationPairs, 0, 2*len(a))
	for _, k := range slices.Sorted(maps.Keys(a)) {
		p = append(p, sharedKey(k), a[k])
	}
	return p
}

// sharedKey returns k, as the constant of cachedAnnotations it equals if
// any.
func sharedKey(k string) string {
	if i := slices.Index(cachedAnnotations, k); i >= 0 {
		return cachedAnnotations[i]
	}
	return k
}

// GetAnnotations returns the annotations, as a new map each call; nil for
// none.
func (m *Meta) GetAnnotations() map[string]string {
	if m.rareOf() == nil || len(m.rareOf().annotations) == 0 {
		return nil
	}
	p := m.rareOf().annotations
	a := make(map[string]string, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		a[p[i]] = p[i+1]
	}
	return a
}

// SetAnnotations sets the annotations (a copy of them).
func (m *Meta) SetAnnotations(annotations map[string]string) {
	if len(annotations) > 0 || m.rareOf() != nil {
		m.more().annotations = pairsOf(annotations)
	}
}

// AnnotationOf returns the value of o's annotation key, and whether it has
// one: a Meta's read in place (its GetAnnotations makes a map each call),
// another object's from its map.
func AnnotationOf(o metav1.Object, key string) (string, bool) {
	if m, ok := o.(*Meta); ok {
		if m.rareOf() == nil {
			return "", false
		}
		p := m.rareOf().annotations
		for i := 0; i+1 < len(p); i += 2 {
			if p[i] == key {
				return p[i+1], true
			}
		}
		return "", false
	}
	v, ok := o.GetAnnotations()[key]
	return v, ok
}
