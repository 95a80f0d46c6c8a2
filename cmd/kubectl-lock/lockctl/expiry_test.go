package lockctl

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestExpiryFlags: --for counts from now and is rounded up to the second
// (the API keeps whole seconds: a Lock never lasts less than asked);
// --until is RFC 3339 in the future; both, a negative --for, a --until
// that does not parse or has passed are errors.
func TestExpiryFlags(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 0, 0, 250_000_000, time.UTC)
	type want struct {
		ExpiresAt string
		Err       string
	}
	cases := map[string]struct {
		reason string
		o      lockOptions
		want   want
	}{
		"Neither":    {"No flag: the Lock never expires.", lockOptions{}, want{}},
		"For":        {"--for 72h from 17:00:00.25, rounded up.", lockOptions{forDuration: 72 * time.Hour}, want{ExpiresAt: "2026-12-06T17:00:01Z"}},
		"Until":      {"--until in the future.", lockOptions{until: "2026-12-07T06:00:00Z"}, want{ExpiresAt: "2026-12-07T06:00:00Z"}},
		"UntilZone":  {"--until with an offset is kept as the same instant, shown in UTC.", lockOptions{until: "2026-12-07T07:00:00+01:00"}, want{ExpiresAt: "2026-12-07T06:00:00Z"}},
		"Both":       {"--for and --until together.", lockOptions{forDuration: time.Hour, until: "2026-12-07T06:00:00Z"}, want{Err: "give --for or --until, not both"}},
		"Negative":   {"A negative --for.", lockOptions{forDuration: -time.Hour}, want{Err: "--for -1h0m0s: the duration must be positive"}},
		"Unparsable": {"--until that is not RFC 3339.", lockOptions{until: "Monday"}, want{Err: `--until "Monday" is not an RFC 3339 time (for example 2026-12-07T06:00:00Z): parsing time "Monday" as "2006-01-02T15:04:05Z07:00": cannot parse "Monday" as "2006"`}},
		"Past":       {"--until that has passed.", lockOptions{until: "2026-12-03T17:00:00Z"}, want{Err: "--until 2026-12-03T17:00:00Z is not in the future: a Lock that has already expired protects nothing"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			at, err := tc.o.expiry(now)
			var got want
			if err != nil {
				got.Err = err.Error()
			}
			if at != nil {
				got.ExpiresAt = (&lockv1alpha1.Lock{Spec: lockv1alpha1.LockSpec{ExpiresAt: at}}).ExpiresAtString()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nexpiry(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLockStatusExpired: kubectl lock's one-word status says Expired from
// the expiresAt on, whatever status lockguard wrote (docs/contract.md rule
// 19), and the Lock's written status before it.
func TestLockStatusExpired(t *testing.T) {
	expiry := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	l := &lockv1alpha1.Lock{}
	l.Generation, l.Status.ObservedGeneration, l.Status.Active = 1, 1, true
	l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive}}
	l.Spec.ExpiresAt = &metav1.Time{Time: expiry}
	got := []string{lockStatusAt(l, expiry.Add(-time.Nanosecond)), lockStatusAt(l, expiry), lockStatusAt(l, expiry.Add(time.Hour))}
	if diff := cmp.Diff([]string{"Active", "Expired", "Expired"}, got); diff != "" {
		t.Errorf("lockStatusAt(a second before, at, after the expiry): -want, +got:\n%s", diff)
	}
}

// TestLockStatusAudit: a live Lock in Audit enforcement reads Audit (Ready
// True, not active: docs/contract.md rule 20), and Expired once expired.
func TestLockStatusAudit(t *testing.T) {
	expiry := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	l := &lockv1alpha1.Lock{}
	l.Spec.Enforcement, l.Spec.ExpiresAt = lockv1alpha1.EnforcementAudit, &metav1.Time{Time: expiry}
	l.Generation, l.Status.ObservedGeneration = 1, 1
	l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonAudit}}
	got := []string{lockStatusAt(l, expiry.Add(-time.Second)), lockStatusAt(l, expiry)}
	if diff := cmp.Diff([]string{"Audit", "Expired"}, got); diff != "" {
		t.Errorf("lockStatusAt(before, at the expiry): -want, +got:\n%s", diff)
	}
}
