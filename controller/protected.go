package controller

import (
	"cmp"
	"slices"
	"strings"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// status.protected: what a Lock covers now, computed from the reconciler's
// caches with the webhook's own rule (lockv1alpha1.Lock.Covers), never a
// second copy of it. A targetRef Lock covers its target when the target
// exists (reconcileTarget reads it anyway); a selector Lock covers the
// cached objects of its namespace, of its kinds, that it Covers
// (targetWatches.protected).

// protectedNone is the status.protected of a Lock that covers nothing.
func protectedNone() *lockv1alpha1.ProtectedStatus {
	return &lockv1alpha1.ProtectedStatus{Count: 0}
}

// protectedTarget is the status.protected of a targetRef Lock whose target
// exists: one resource, named.
func protectedTarget(target lockv1alpha1.TargetKey) *lockv1alpha1.ProtectedStatus {
	return &lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: target.Kind, Name: target.Name}}}
}

// protectedList collects what a Lock covers: it counts every resource
// added and keeps the first lockv1alpha1.MaxProtectedNames by kind and
// name, so that its memory does not grow with the count.
type protectedList struct {
	count int32
	first []lockv1alpha1.ProtectedResource
}

// add counts r, and keeps it if it is among the first names.
func (p *protectedList) add(r lockv1alpha1.ProtectedResource) {
	p.count++
	i, _ := slices.BinarySearchFunc(p.first, r, compareProtected)
	if i >= lockv1alpha1.MaxProtectedNames {
		return
	}
	if len(p.first) == lockv1alpha1.MaxProtectedNames {
		p.first = p.first[:lockv1alpha1.MaxProtectedNames-1]
	}
	p.first = slices.Insert(p.first, i, r)
}

// status is the list as status.protected says it.
func (p *protectedList) status() *lockv1alpha1.ProtectedStatus {
	return &lockv1alpha1.ProtectedStatus{Count: p.count, Resources: p.first}
}

// compareProtected orders resources by kind, then name.
func compareProtected(a, b lockv1alpha1.ProtectedResource) int {
	return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
}
