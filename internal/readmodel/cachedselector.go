package readmodel

import (
	"maps"
	"slices"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// cachedSelector is a selector Lock's selector as a CachedLock keeps it:
// its matchLabels, when it has any, as the first requirements of
// MatchExpressions, one In requirement of one value per label, in the
// order of the keys (issue 38: a Go map of even one label is about 300
// bytes, and a selector's matchLabels are often the Lock's own; such a
// requirement is 72). A label key=value and the requirement "key in
// (value)" select the same objects (LockSelector.Matches), are valid
// alike (LockSelector.Validate), and give the same coverage keys
// (coverageKeys: the first label by key, or the In requirement of fewest
// values, the first of them): sel is what the LockIndex's decisions read
// (CachedLock.core), and selector gives the Lock's own selector back for
// everything else (CachedLock.Lock, which status.scope and every copy
// read).
type cachedSelector struct {
	sel lockv1alpha1.LockSelector
	// labels is the number of sel.MatchExpressions' first requirements
	// that are the selector's matchLabels.
	labels int32
	// nilExpressions: the selector's own MatchExpressions is nil (not
	// empty), when labels is not 0.
	nilExpressions bool
}

// newCachedSelector returns s as a CachedLock keeps it, nil for nil. It
// takes s's expressions and kinds as they are (read-only, as every cached
// Lock's).
func newCachedSelector(s *lockv1alpha1.LockSelector) *cachedSelector {
	if s == nil {
		return nil
	}
	if len(s.MatchLabels) == 0 {
		return &cachedSelector{sel: *s}
	}
	exprs := make([]lockv1alpha1.LabelSelectorRequirement, 0, len(s.MatchLabels)+len(s.MatchExpressions))
	for _, k := range slices.Sorted(maps.Keys(s.MatchLabels)) {
		exprs = append(exprs, lockv1alpha1.LabelSelectorRequirement{Key: k, Operator: lockv1alpha1.SelectorOpIn, Values: []string{s.MatchLabels[k]}})
	}
	return &cachedSelector{
		sel:            lockv1alpha1.LockSelector{MatchExpressions: append(exprs, s.MatchExpressions...), Kinds: s.Kinds},
		labels:         int32(len(s.MatchLabels)),
		nilExpressions: s.MatchExpressions == nil,
	}
}

// decided returns the selector the LockIndex's decisions read (the
// cache's: read-only), nil for none. It allocates nothing.
func (c *cachedSelector) decided() *lockv1alpha1.LockSelector {
	if c == nil {
		return nil
	}
	return &c.sel
}

// selector returns the Lock's own selector, as a new LockSelector that
// shares nothing with c but strings; nil for none.
func (c *cachedSelector) selector() *lockv1alpha1.LockSelector {
	if c == nil {
		return nil
	}
	if c.labels == 0 {
		return c.sel.DeepCopy()
	}
	s := &lockv1alpha1.LockSelector{MatchLabels: make(map[string]string, c.labels), Kinds: slices.Clone(c.sel.Kinds)}
	for _, r := range c.sel.MatchExpressions[:c.labels] {
		s.MatchLabels[r.Key] = r.Values[0]
	}
	if rest := c.sel.MatchExpressions[c.labels:]; !c.nilExpressions {
		s.MatchExpressions = make([]lockv1alpha1.LabelSelectorRequirement, len(rest))
		for i := range rest {
			rest[i].DeepCopyInto(&s.MatchExpressions[i])
		}
	}
	return s
}
