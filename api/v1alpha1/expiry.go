package v1alpha1

import (
	"time"
)

// When a Lock counts (docs/contract.md rules 2 and 19): the rule is written
// here once, in Live, and every guard, the Lock index, the reconciler
// (annotation, labels and status) and kubectl lock derive from it, each
// asking at the time of its own clock.

// Standing reports whether the Lock counts whatever the time: it is not
// being deleted and its scope is valid (Scope). A standing Lock is live
// until its expiry (Live).
func (l *Lock) Standing() bool {
	return l.DeletionTimestamp == nil && l.Scope() == nil
}

// Live reports whether the Lock counts at time t (docs/contract.md rules 2
// and 19): it is standing (Standing) and not expired at t (ExpiredAt).
func (l *Lock) Live(t time.Time) bool {
	return !l.ExpiredAt(t) && l.Standing()
}

// Enforces reports whether the Lock refuses what it covers: its
// enforcement is not Audit (docs/contract.md rule 20). The guards refuse
// only for live Locks that enforce (Enforcing); a live Lock that does not
// is an audit Lock: it refuses nothing and records what it would refuse.
func (l *Lock) Enforces() bool {
	return l.Spec.Enforcement != EnforcementAudit
}

// Enforcing reports whether the Lock refuses at time t: it is live and
// enforces (Enforces).
func (l *Lock) Enforcing(t time.Time) bool {
	return l.Enforces() && l.Live(t)
}

// ExpiredAt reports whether the Lock has expired at time t: it has an
// expiresAt and t is that instant or later. A Lock that expires at
// 10:00:00 protects at 09:59:59.999 and not at 10:00:00.
func (l *Lock) ExpiredAt(t time.Time) bool {
	e := l.Spec.ExpiresAt
	return e != nil && !t.Before(e.Time)
}

// ExpiresIn returns how long after t the Lock expires, and whether it
// will: false for a Lock without expiresAt or already expired at t. The
// reconciler looks at the Lock again after that long.
func (l *Lock) ExpiresIn(t time.Time) (time.Duration, bool) {
	e := l.Spec.ExpiresAt
	if e == nil || l.ExpiredAt(t) {
		return 0, false
	}
	return e.Time.Sub(t), true
}

// ExpiresAtString returns the Lock's expiresAt as RFC 3339 in UTC, as
// messages, kubectl lock and the API show it, or "" when it has none.
func (l *Lock) ExpiresAtString() string {
	if l.Spec.ExpiresAt == nil {
		return ""
	}
	return string(l.appendExpiresAt(nil))
}

// appendExpiresAt appends ExpiresAtString to b; the Lock has an expiresAt.
func (l *Lock) appendExpiresAt(b []byte) []byte {
	return l.Spec.ExpiresAt.UTC().AppendFormat(b, time.RFC3339)
}
