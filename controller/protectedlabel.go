package controller

import (
	"slices"
	"time"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The protected label (ProtectedLabel, docs/optin.md): the reconciler
// keeps it on each object of an opted-in kind that a live, enforcing Lock
// covers, and on no other, so that the chart's protect-locked entry
// (objectSelector on it) sends lockguard the object's DELETE whatever the
// API server's namespace cache says. "Covered" is the annotation's own
// fact (reconcileTarget: the enforcing Locks that LiveLocksCoveringWith
// returns), never computed a second time. The admission of a Lock's
// create labels the target first (webhook/create.go), with
// ProtectedPendingAnnotation, which keeps the label for
// ProtectedPendingGrace until the Lock reaches the reconciler's cache.

// protectedChange is what a target's ProtectedLabel and
// ProtectedPendingAnnotation need: the zero value changes nothing.
type protectedChange struct {
	// label, when set, puts ProtectedLabel=true on (true) or takes it
	// off (false).
	label *bool
	// clearPending removes ProtectedPendingAnnotation.
	clearPending bool
}

// none reports whether c changes nothing.
func (c protectedChange) none() bool { return c.label == nil && !c.clearPending }

// protectedLabelChange returns the change that an object with labels and
// annotations (the cache's: CacheTransform keeps both) needs at now when
// optedIn says whether its kind is opted in (of another group than
// core.navique.com) and covering names the live, enforcing Locks that
// cover it;
// and, when a pending mark alone keeps the label, how soon the mark's
// grace ends (0 otherwise). An object of the group's own kinds is left as
// it is: their deletes reach lockguard through the object guard's entry.
func protectedLabelChange(optedIn bool, covering []string, labels, annotations map[string]string, now time.Time) (protectedChange, time.Duration) {
	if !optedIn {
		return protectedChange{}, 0
	}
	v, present := labels[lockv1alpha1.ProtectedLabel]
	mark, marked := annotations[lockv1alpha1.ProtectedPendingAnnotation]
	if len(covering) > 0 {
		// The mark goes once the Lock whose create put it covers the
		// object in the cache, or once its grace is over (PendingWait).
		left := lockv1alpha1.PendingWait(mark, lockv1alpha1.ProtectedPendingGrace, now, func(name string) bool { return slices.Contains(covering, name) })
		c := protectedChange{clearPending: marked && left == 0}
		if v != "true" {
			c.label = ptrTo(true)
		}
		if !marked {
			return c, 0
		}
		return c, left
	}
	if left := lockv1alpha1.PendingLeft(mark, lockv1alpha1.ProtectedPendingGrace, now); left > 0 && v == "true" {
		// The Lock whose create put it there may not be cached yet.
		return protectedChange{}, left
	}
	c := protectedChange{clearPending: marked}
	if present {
		c.label = ptrTo(false)
	}
	return c, 0
}

// ptrTo returns a pointer to a copy of v.
func ptrTo[T any](v T) *T { return &v }
