package controller

import (
	"fmt"
	"time"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// Expiry (docs/contract.md rule 19). A Lock stops counting at its
// expiresAt on every path at once: the guards and the Lock index ask
// Lock.Live at their own now, whatever the reconciler has done. The
// reconciler follows: each pass comes back when the first Lock it read
// expires (soonest, RequeueAfter: no polling), and then writes the target's
// annotation and labels without the expired Lock, the namespace's label
// without it (the last Lock of a namespace takes the label with it), and
// the expired Lock's status: Expired (expiredObservation).
//
// An expired Lock is kept, not deleted: it is the record of what was
// protected, why (spec.reason) and until when, and deleting it is the
// user's decision, with the same permission as deleting any Lock. Its
// status is written once: a pass over an expired Lock whose status
// already says so writes nothing.

// ExpiredMessage is the Ready message of an expired Lock.
func ExpiredMessage(lock *lockv1alpha1.Lock) string {
	return fmt.Sprintf("this %s expired at %s and protects nothing any more; it is kept as a record until it is deleted", nounOf(lock), lock.ExpiresAtString())
}

// expiredObservation is what an expired Lock's status says: not active,
// Ready False with reason Expired, covering nothing.
func expiredObservation(lock *lockv1alpha1.Lock) observation {
	return observation{reason: lockv1alpha1.ReasonExpired, message: ExpiredMessage(lock)}
}

// soonest returns after, or how long after now the first of locks that
// will expire does, whichever is sooner; zero (and no expiry) for none.
func soonest(after time.Duration, now time.Time, locks ...[]lockv1alpha1.Lock) time.Duration {
	next, will := readmodel.NextExpiry(now, locks...)
	if !will || (after > 0 && after < next) {
		return after
	}
	return next
}
