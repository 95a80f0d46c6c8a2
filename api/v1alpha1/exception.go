package v1alpha1

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// When a LockException lets a request through (docs/contract.md rule 20):
// the rule is written here once; lockguard's create admission
// (ValidateExceptionCreate) and its object and update guards (Pierces)
// derive from it.

// MaxExceptionLifetime is the longest a LockException may live: at create,
// its expiresAt is at most this far ahead (plus ExceptionClockSkew).
const MaxExceptionLifetime = 24 * time.Hour

// ExceptionClockSkew is how far past MaxExceptionLifetime an expiresAt may
// be at create: a client whose clock runs ahead of lockguard's, asking
// for exactly 24 hours, is not refused. It never lets an exception start
// expired: expiresAt must be after lockguard's now.
const ExceptionClockSkew = time.Minute

// ExpiredAt reports whether the exception has expired at time t: t is its
// expiresAt or later, as for a Lock (Lock.ExpiredAt). An exception that
// expires at 10:00:00 lets requests through at 09:59:59.999, not at
// 10:00:00.
func (e *LockException) ExpiredAt(t time.Time) bool {
	return !t.Before(e.Spec.ExpiresAt.Time)
}

// Target returns the key of the object the exception lets requests
// through to, in its namespace, or why it can name none (as Lock.Target).
func (e *LockException) Target() (TargetKey, error) {
	ref := e.Spec.TargetRef
	gk, err := ref.GroupKind()
	if err != nil {
		return TargetKey{}, fmt.Errorf("targetRef.apiVersion %q is not a valid API version: %w", ref.APIVersion, err)
	}
	if err := Protectable(gk); err != nil {
		return TargetKey{}, err
	}
	return TargetKey{Namespace: e.Namespace, Group: gk.Group, Kind: gk.Kind, Name: ref.Name}, nil
}

// Pierces reports whether the exception lets user send op on the object
// key through the Locks named refusing (the enforcing Locks that refuse
// it), at time t: the exception is not being deleted nor expired at t,
// names user, op and key, and names every one of refusing (at least one).
// A request that one more Lock refuses is not let through.
func (e *LockException) Pierces(key TargetKey, op ExceptionOperation, user string, refusing []string, t time.Time) bool {
	if e.DeletionTimestamp != nil || e.ExpiredAt(t) || user == "" || e.Spec.User != user ||
		!slices.Contains(e.Spec.Operations, op) || len(refusing) == 0 {
		return false
	}
	target, err := e.Target()
	if err != nil || target != key {
		return false
	}
	for _, name := range refusing {
		if !slices.Contains(e.Spec.Locks, name) {
			return false
		}
	}
	return true
}

// ErrExceptionUser is the error of an exception created by a user other
// than the one it names.
var ErrExceptionUser = errors.New("spec.user must be the username of the exception's creator")

// ValidateExceptionCreate returns why the create of an exception with
// spec by user, at time now, is refused, or nil: spec.user must be user,
// spec.expiresAt after now and at most MaxExceptionLifetime (plus
// ExceptionClockSkew) after it, its target a kind a Lock can protect.
// Who may pierce the Locks (BreakGlassVerb) is checked apart.
func ValidateExceptionCreate(spec *LockExceptionSpec, user string, now time.Time) error {
	if spec.User != user {
		return fmt.Errorf("%w (%q), not %q", ErrExceptionUser, user, spec.User)
	}
	expires := spec.ExpiresAt.Time
	switch {
	case !now.Before(expires):
		return fmt.Errorf("spec.expiresAt %s is not in the future", expires.UTC().Format(time.RFC3339))
	case expires.After(now.Add(MaxExceptionLifetime + ExceptionClockSkew)):
		return fmt.Errorf("spec.expiresAt %s is more than %s ahead: an exception lives at most %s", expires.UTC().Format(time.RFC3339), MaxExceptionLifetime, MaxExceptionLifetime)
	}
	gk, err := spec.TargetRef.GroupKind()
	if err != nil {
		return fmt.Errorf("spec.targetRef.apiVersion %q is not a valid API version: %w", spec.TargetRef.APIVersion, err)
	}
	if err := Protectable(gk); err != nil {
		return fmt.Errorf("spec.targetRef: %w", err)
	}
	if len(spec.Locks) == 0 || len(spec.Operations) == 0 {
		return errors.New("spec.locks and spec.operations must each name at least one")
	}
	return nil
}
