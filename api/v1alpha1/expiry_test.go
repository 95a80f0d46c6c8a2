package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLive: a Lock counts while it is standing and until its expiresAt,
// not at that second or after (docs/contract.md rules 2 and 19); every
// guard, the index, the reconciler and kubectl lock ask Live.
func TestLive(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	lock := func(expires *time.Time, deleting bool) *Lock {
		l := &Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep"}}
		l.Spec.TargetRef = TargetReference{Kind: "Stack", Name: "forge"}
		if expires != nil {
			l.Spec.ExpiresAt = &metav1.Time{Time: *expires}
		}
		if deleting {
			l.DeletionTimestamp = &metav1.Time{Time: now}
		}
		return l
	}
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	type want struct {
		Live, Expired, Target, Covers, Will bool
		In                                  time.Duration
	}
	cases := map[string]struct {
		reason string
		lock   *Lock
		want   want
	}{
		"NoExpiry":     {"A Lock without expiresAt never expires.", lock(nil, false), want{Live: true, Target: true, Covers: true}},
		"Future":       {"A Lock counts before its expiresAt, and says how long it has left.", lock(at(time.Hour), false), want{Live: true, Target: true, Covers: true, Will: true, In: time.Hour}},
		"JustBefore":   {"A nanosecond before expiresAt the Lock still counts.", lock(at(time.Nanosecond), false), want{Live: true, Target: true, Covers: true, Will: true, In: time.Nanosecond}},
		"ExactlyNow":   {"At its expiresAt the Lock has expired: that second protects nothing.", lock(at(0), false), want{Expired: true}},
		"Past":         {"After its expiresAt the Lock has expired.", lock(at(-time.Minute), false), want{Expired: true}},
		"BeingDeleted": {"A Lock being deleted does not count, whatever its expiry.", lock(at(time.Hour), true), want{Will: true, In: time.Hour}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, target := tc.lock.LiveTarget(now)
			in, will := tc.lock.ExpiresIn(now)
			got := want{
				Live:    tc.lock.Live(now),
				Expired: tc.lock.ExpiredAt(now),
				Target:  target,
				Covers:  tc.lock.Covers(Object{Namespace: "forge", Group: Group, Kind: "Stack", Name: "forge"}, now),
				Will:    will,
				In:      in,
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nLive(...), ExpiredAt, LiveTarget, Covers, ExpiresIn: -want, +got:\n%s", tc.reason, diff)
			}
			if standing := tc.lock.DeletionTimestamp == nil; tc.lock.Standing() != standing {
				t.Errorf("Standing() = %t, want %t: expiry does not change it", tc.lock.Standing(), standing)
			}
		})
	}
}

// TestExpirySelector: a selector Lock expires as a targetRef Lock does,
// for its objects, their kind and its namespace.
func TestExpirySelector(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	l := &Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "all"}}
	l.Spec.Selector = &LockSelector{}
	l.Spec.ExpiresAt = &metav1.Time{Time: now}
	stack := Object{Namespace: "forge", Group: Group, Kind: "Stack", Name: "forge"}
	before := now.Add(-time.Second)
	if !l.Covers(stack, before) || !l.CoversNamespace(before) || !l.CoversKind(stack.Key().GroupKind(), before) {
		t.Errorf("a second before its expiry, the selector Lock covers nothing")
	}
	if l.Covers(stack, now) || l.CoversNamespace(now) || l.CoversKind(stack.Key().GroupKind(), now) {
		t.Errorf("at its expiry, the selector Lock still covers something")
	}
	if got, want := l.ExpiresAtString(), "2026-12-03T17:00:00Z"; got != want {
		t.Errorf("ExpiresAtString() = %q, want %q", got, want)
	}
}
