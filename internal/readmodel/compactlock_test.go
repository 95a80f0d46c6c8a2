package readmodel

import (
	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// compactLock returns what the cache keeps of o, a Lock as decoded: a copy
// of its own (so that the list it was decoded in, whose array holds every
// Lock of the page and room to grow, is freed once the list is stored),
// trimmed by trimLock. The copy takes over o's selector, conditions and
// status.protected, changed in place: o is the decoder's, read by no one
// after the transform (as trimMetadata's objects). A cached Lock is
// read-only. It is what the cache stored before CachedLock, and the
// reference the tests hold a CachedLock's reads against.
func compactLock(o *lockv1alpha1.Lock, shared *interner) *lockv1alpha1.Lock {
	c := &lockv1alpha1.Lock{TypeMeta: o.TypeMeta, ObjectMeta: o.ObjectMeta, Spec: o.Spec, Status: o.Status}
	trimLock(c, shared)
	return c
}
