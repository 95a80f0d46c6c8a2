package v1alpha1

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func exception(expires time.Time, ops ...ExceptionOperation) *LockException {
	return &LockException{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x"},
		Spec: LockExceptionSpec{TargetRef: TargetReference{Kind: "Stack", Name: "app"}, Locks: []string{"a", "b"},
			Operations: ops, Reason: "incident 7", User: "alice", ExpiresAt: metav1.NewTime(expires)},
	}
}

func TestExceptionPierces(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	e := exception(now.Add(time.Minute), ExceptionDelete)
	key := TargetKey{Namespace: "ns", Group: Group, Kind: "Stack", Name: "app"}
	deleting := e.DeepCopy()
	deleting.DeletionTimestamp = &metav1.Time{Time: now}
	for _, c := range []struct {
		name     string
		e        *LockException
		key      TargetKey
		op       ExceptionOperation
		user     string
		refusing []string
		at       time.Time
		want     bool
	}{
		{"every refusing Lock named", e, key, ExceptionDelete, "alice", []string{"b", "a"}, now, true},
		{"one of the named Locks", e, key, ExceptionDelete, "alice", []string{"a"}, now, true},
		{"a Lock not named refuses too", e, key, ExceptionDelete, "alice", []string{"a", "c"}, now, false},
		{"no refusing Lock", e, key, ExceptionDelete, "alice", nil, now, false},
		{"another user", e, key, ExceptionDelete, "bob", []string{"a"}, now, false},
		{"no user", e, key, ExceptionDelete, "", []string{"a"}, now, false},
		{"an operation not named", e, key, ExceptionUpdate, "alice", []string{"a"}, now, false},
		{"another object", e, TargetKey{Namespace: "ns", Group: Group, Kind: "Stack", Name: "other"}, ExceptionDelete, "alice", []string{"a"}, now, false},
		{"another kind", e, TargetKey{Namespace: "ns", Group: Group, Kind: "Gateway", Name: "app"}, ExceptionDelete, "alice", []string{"a"}, now, false},
		{"another namespace", e, TargetKey{Namespace: "other", Group: Group, Kind: "Stack", Name: "app"}, ExceptionDelete, "alice", []string{"a"}, now, false},
		{"a millisecond before expiry", e, key, ExceptionDelete, "alice", []string{"a"}, now.Add(time.Minute - time.Millisecond), true},
		{"at expiry", e, key, ExceptionDelete, "alice", []string{"a"}, now.Add(time.Minute), false},
		{"being deleted", deleting, key, ExceptionDelete, "alice", []string{"a"}, now, false},
	} {
		if got := c.e.Pierces(c.key, c.op, c.user, c.refusing, c.at); got != c.want {
			t.Errorf("%s: Pierces = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestValidateExceptionCreate(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		expires time.Time
		user    string
		mutate  func(*LockExceptionSpec)
		want    string // "" allowed; else a part of the error
	}{
		{"an hour", now.Add(time.Hour), "alice", nil, ""},
		{"exactly 24 hours", now.Add(24 * time.Hour), "alice", nil, ""},
		{"24 hours and the skew", now.Add(24*time.Hour + ExceptionClockSkew), "alice", nil, ""},
		{"past the skew", now.Add(24*time.Hour + ExceptionClockSkew + time.Second), "alice", nil, "at most 24h0m0s"},
		{"a week", now.Add(7 * 24 * time.Hour), "alice", nil, "at most"},
		{"now", now, "alice", nil, "not in the future"},
		{"the past", now.Add(-time.Second), "alice", nil, "not in the future"},
		{"another user", now.Add(time.Hour), "bob", nil, ErrExceptionUser.Error()},
		{"a Lock target", now.Add(time.Hour), "alice", func(s *LockExceptionSpec) { s.TargetRef.Kind = "Lock" }, ErrLockTarget.Error()},
		{"another group", now.Add(time.Hour), "alice", func(s *LockExceptionSpec) { s.TargetRef.APIVersion = "apps/v1" }, ErrNotProtectable.Error()},
		{"no Locks", now.Add(time.Hour), "alice", func(s *LockExceptionSpec) { s.Locks = nil }, "at least one"},
	} {
		spec := exception(c.expires, ExceptionDelete).Spec
		if c.mutate != nil {
			c.mutate(&spec)
		}
		err := ValidateExceptionCreate(&spec, c.user, now)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want allowed", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
	spec := exception(now.Add(time.Hour)).Spec
	if err := ValidateExceptionCreate(&spec, "bob", now); !errors.Is(err, ErrExceptionUser) {
		t.Errorf("another user: %v, want ErrExceptionUser", err)
	}
}

func TestBreakGlassMessage(t *testing.T) {
	got := BreakGlassMessage("ns", "lk")
	want := `creating a LockException that pierces Lock ns/lk needs the verb "break-glass" on locks.core.navique.com (RBAC); ask for the ClusterRole lockguard-break-glass`
	if got != want {
		t.Errorf("BreakGlassMessage = %q, want %q", got, want)
	}
}

func TestLockExceptionNotProtectable(t *testing.T) {
	if err := Protectable(GroupVersion.WithKind("LockException").GroupKind()); !errors.Is(err, ErrExceptionTarget) {
		t.Errorf("Protectable(LockException) = %v, want ErrExceptionTarget", err)
	}
}
