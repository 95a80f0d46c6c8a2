package readmodel

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The LockIndex reads the objects of the Lock informer's store through
// these functions: a *CachedLock in lockguard's cache (CacheTransform),
// a *lockv1alpha1.Lock in an informer without that transform (tests).
// They copy a Lock only when the read returns it, so that an admission
// decision copies the Locks it names and no other.

// lockCore returns the Lock obj is as far as the LockIndex's decisions
// read it: its name, namespace, deletionTimestamp and spec (Lock.Standing,
// StandingTarget, ExpiredAt, Selects, ...), sharing the store's selector
// (a CachedLock's with its matchLabels as requirements that decide
// alike, cachedSelector) and expiry (read-only), in a value that
// allocates nothing when it does not escape; false when obj is not a
// Lock.
func lockCore(obj any) (lockv1alpha1.Lock, bool) {
	switch l := obj.(type) {
	case *CachedLock:
		return l.core(), true
	case *lockv1alpha1.Lock:
		return *l, true
	}
	return lockv1alpha1.Lock{}, false
}

// copyLock returns a copy of obj, a Lock of the store, that shares nothing
// with it.
func copyLock(obj any) lockv1alpha1.Lock {
	switch l := obj.(type) {
	case *CachedLock:
		return *l.Lock()
	case *lockv1alpha1.Lock:
		return *l.DeepCopy()
	}
	return lockv1alpha1.Lock{}
}

// lockName returns the namespace and name of obj, a Lock of the store.
func lockName(obj any) types.NamespacedName {
	switch l := obj.(type) {
	case *CachedLock:
		return types.NamespacedName{Namespace: l.namespace, Name: l.name}
	case *lockv1alpha1.Lock:
		return types.NamespacedName{Namespace: l.Namespace, Name: l.Name}
	}
	return types.NamespacedName{}
}

// lockUID returns the UID of obj, a Lock of the store or its client-go
// tombstone, and false for anything else.
func lockUID(obj any) (types.UID, bool) {
	switch l := obj.(type) {
	case *CachedLock:
		return l.GetUID(), true
	case *lockv1alpha1.Lock:
		return l.UID, true
	}
	return "", false
}

// lockReadiness returns the status.active of obj, a Lock of the store,
// whether it has a Ready condition and that condition's reason; false
// when obj is not a Lock. It copies nothing.
func lockReadiness(obj any) (active, ready bool, reason string, ok bool) {
	switch l := obj.(type) {
	case *CachedLock:
		active = l.flags&flagActive != 0
		if l.flags&flagReady != 0 {
			return active, true, l.ready.reason, true
		}
		if l.rare != nil {
			if c := meta.FindStatusCondition(l.rare.conditions, lockv1alpha1.ConditionReady); c != nil {
				return active, true, c.Reason, true
			}
		}
		return active, false, "", true
	case *lockv1alpha1.Lock:
		if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady); c != nil {
			return l.Status.Active, true, c.Reason, true
		}
		return l.Status.Active, false, "", true
	}
	return false, false, "", false
}
