package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

// TestExpiryAgreement: at every instant, the delete guards decide an
// expiring Lock as Lock.Live says (docs/contract.md rule 19), whether they
// read it from lockguard's index or from the API server (a cache that
// has not seen it), with a targetRef Lock and a selector Lock: denied a
// second before its expiresAt, allowed at it and after. No event happens
// at the expiry: the decision depends on the clock alone.
func TestExpiryAgreement(t *testing.T) {
	expiry := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	ref := newLock("forge", "until-five", "", "Stack", "forge")
	ref.Spec.ExpiresAt = &metav1.Time{Time: expiry}
	all := newLock("forge", "all-until-five", "", "", "")
	all.Spec.TargetRef, all.Spec.Selector = lockv1alpha1.TargetReference{}, &lockv1alpha1.LockSelector{}
	all.Spec.ExpiresAt = &metav1.Time{Time: expiry}

	for _, l := range []*lockv1alpha1.Lock{ref, all} {
		t.Run(l.Name, func(t *testing.T) {
			var now time.Time
			clock := func() time.Time { return now }
			cached := NewHandler(Config{Locks: readmodeltest.Index(t, clock, *l), Now: clock})
			api := NewHandler(Config{Locks: NoLocks{}, Live: fake.NewClientBuilder().WithScheme(lockScheme(t)).WithObjects(l).Build(), Now: clock})
			req := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", "forge", "")
			for _, at := range []time.Duration{-time.Second, -time.Nanosecond, 0, time.Nanosecond, time.Hour} {
				now = expiry.Add(at)
				want := !l.Live(now)
				got := map[string]bool{
					"index":      cached.Decide(context.Background(), req).Allowed,
					"API server": api.Decide(context.Background(), req).Allowed,
				}
				if diff := cmp.Diff(map[string]bool{"index": want, "API server": want}, got); diff != "" {
					t.Errorf("DELETE allowed at expiry%+v: -want, +got:\n%s", at, diff)
				}
			}
		})
	}
}

// TestCreateExpired: lockguard refuses the create of a Lock whose
// expiresAt is not after its clock's now (it would protect nothing),
// dry run or not, whatever collaborators it has, and names both times; a
// Lock that expires a second later is admitted.
func TestCreateExpired(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 0, 0, 500_000_000, time.UTC)
	clock := func() time.Time { return now }
	l := newLock("forge", "late", "", "Stack", "forge")
	l.UID = "u"
	cases := map[string]struct {
		reason  string
		expires time.Time
		dryRun  bool
		o       CreateOptions
		want    result
	}{
		"Past": {
			reason:  "A Lock that expired a minute ago is refused.",
			expires: now.Add(-time.Minute).Truncate(time.Second),
			want: result{Code: 403, Reason: metav1.StatusReasonForbidden,
				Message: "spec.expiresAt 2026-12-03T16:59:00Z is not in the future (it is 2026-12-03T17:00:00Z): a Lock that has already expired protects nothing; set a later expiresAt, or none"},
		},
		"ThisSecond": {
			reason:  "A Lock that expires at the current second has expired already.",
			expires: now.Truncate(time.Second),
			dryRun:  true,
			o:       CreateOptions{Labeler: NamespaceLabelerFunc(func(context.Context, string) error { return nil })},
			want: result{Code: 403, Reason: metav1.StatusReasonForbidden,
				Message: "spec.expiresAt 2026-12-03T17:00:00Z is not in the future (it is 2026-12-03T17:00:00Z): a Lock that has already expired protects nothing; set a later expiresAt, or none"},
		},
		"NextSecond": {
			reason:  "A Lock that expires at the next second is admitted.",
			expires: now.Truncate(time.Second).Add(time.Second),
			want:    result{Allowed: true, Code: 200},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := l.DeepCopy()
			l.Spec.ExpiresAt = &metav1.Time{Time: tc.expires}
			tc.o.Now = clock
			got := resultOf(NewCreateHandler(tc.o).Handle(context.Background(), lockCreate(t, "forge", l, tc.dryRun)))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
	if !strings.Contains(ExpiredCreateMessage(l, now), "set a later expiresAt") {
		t.Error("ExpiredCreateMessage does not say how to fix the Lock")
	}
}
