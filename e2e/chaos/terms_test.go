//go:build chaos

package chaos

import (
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Locks that expire and Locks in Audit enforcement in the mix
// (docs/contract.md rules 19 and 20, issue 39).
//
// A Lock with expiresAt protects until that second, by lockguard's clock,
// which is this process's: a request whose answer the client got before
// the Lock expired was decided while it protected, so allowing it is a
// violation; one answered at or after expiresAt may have been decided
// either side of it, and either answer is right (counted, never judged).
// The worker stops counting an expired Lock as soon as it has expired
// (expire): an object it covered may go from then on, so the invariant
// check of observe misses an object that went just before the expiry and
// was seen gone only after it; the worker's own deletes are judged
// exactly, by their answer's time.
//
// An Audit Lock refuses nothing: the worker treats its target as
// unlocked (lockRec.covers), and a refusal that names an Audit Lock is a
// violation (lockguard names only the Locks that enforce).
const (
	// expiringOneIn and auditOneIn are the shares of the Locks created
	// (by createLock and createSelectorLock) that expire, and that are
	// in Audit.
	expiringOneIn, auditOneIn = 5, 8
	// minExpiry and maxExpiry bound how long after its create a Lock
	// expires.
	minExpiry, maxExpiry = 4 * time.Second, 20 * time.Second
)

// withTerms gives lock, about to be created for the record l, an expiry
// or Audit enforcement, at random, and records it in l.
func (w *worker) withTerms(l *lockRec, lock *lockv1alpha1.Lock) {
	switch {
	case w.rng.IntN(expiringOneIn) == 0:
		span := minExpiry + time.Duration(w.rng.Int64N(int64(maxExpiry-minExpiry)))
		// Whole seconds: the API server keeps expiresAt to the second.
		l.expires = time.Now().Add(span).Truncate(time.Second)
		lock.Spec.ExpiresAt = &metav1.Time{Time: l.expires}
		w.n.expiringLocks.Add(1)
	case w.rng.IntN(auditOneIn) == 0:
		l.audit = true
		lock.Spec.Enforcement = lockv1alpha1.EnforcementAudit
		w.n.auditLocks.Add(1)
		if w.audits == nil {
			w.audits = map[string]bool{}
		}
		w.audits[l.name] = true
	}
}

// expiredBy reports whether the Lock has expired at t (Lock.Live: it
// protects while t is before expiresAt).
func (l *lockRec) expiredBy(t time.Time) bool {
	return !l.expires.IsZero() && !t.Before(l.expires)
}

// expire marks the live Locks that have expired by now gone: they
// protect nothing from then on.
func (w *worker) expire(now time.Time) {
	for _, l := range w.locks {
		if l.state == live && l.expiredBy(now) {
			l.state = gone
			w.n.expiredLocks.Add(1)
		}
	}
}

// unexpired returns the Locks of locks that enforce and had not expired
// when the answer to a request sent while they protected arrived (now):
// the Locks that request had to be refused for. It marks the others gone
// (expire) and counts the request when some expired in flight.
func (w *worker) unexpired(locks []*lockRec) []*lockRec {
	w.expire(time.Now())
	locks = slices.DeleteFunc(slices.Clone(locks), func(l *lockRec) bool { return l.audit })
	out := slices.DeleteFunc(slices.Clone(locks), func(l *lockRec) bool { return l.state == gone && !l.expires.IsZero() })
	if len(out) < len(locks) {
		w.n.expiredInFlight.Add(1)
	}
	return out
}

// deniedByAudit checks err, a refusal that names Locks after marker (up
// to the "]" that closes the list), and reports a violation of kind when
// it names an Audit Lock of the worker.
func (w *worker) deniedByAudit(kind deleteKind, err error, marker string) {
	_, rest, ok := strings.Cut(err.Error(), marker)
	if !ok {
		return
	}
	names, _, _ := strings.Cut(rest, "]")
	for _, name := range strings.Fields(names) {
		if w.audits[name] {
			w.violation(kind, "a %s was refused naming Lock %s, which is in Audit and refuses nothing: %v", kind, name, err)
			return
		}
	}
}
