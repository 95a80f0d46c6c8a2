package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLowers(t *testing.T) {
	monday := metav1.NewTime(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	tuesday := metav1.NewTime(monday.Add(24 * time.Hour))
	type want struct {
		what   Lowered
		lowers bool
	}
	cases := map[string]struct {
		reason    string
		old, next LockSpec
		want      want
	}{
		"ReadOnlyToCanNotDelete": {reason: "dropping the freeze lowers the level", old: LockSpec{Level: LevelReadOnly}, next: LockSpec{Level: LevelCanNotDelete}, want: want{LoweredLevel, true}},
		"ReadOnlyToDefault":      {reason: "an empty level is CanNotDelete", old: LockSpec{Level: LevelReadOnly}, next: LockSpec{}, want: want{LoweredLevel, true}},
		"CanNotDeleteToReadOnly": {reason: "raising is free", old: LockSpec{Level: LevelCanNotDelete}, next: LockSpec{Level: LevelReadOnly}, want: want{}},
		"ReadOnlyKept":           {reason: "a new reason lowers nothing", old: LockSpec{Level: LevelReadOnly}, next: LockSpec{Level: LevelReadOnly, Reason: "other"}, want: want{}},
		"CanNotDeleteKept":       {reason: "nothing changes", old: LockSpec{}, next: LockSpec{Level: LevelCanNotDelete}, want: want{}},
		"ExpiryAdded":            {reason: "an expiry on a Lock that had none shortens it", old: LockSpec{}, next: LockSpec{ExpiresAt: &monday}, want: want{LoweredExpiry, true}},
		"ExpiryEarlier":          {reason: "an earlier expiry shortens it", old: LockSpec{ExpiresAt: &tuesday}, next: LockSpec{ExpiresAt: &monday}, want: want{LoweredExpiry, true}},
		"ExpiryLater":            {reason: "extending is free", old: LockSpec{ExpiresAt: &monday}, next: LockSpec{ExpiresAt: &tuesday}, want: want{}},
		"ExpiryKept":             {reason: "the same expiry lowers nothing", old: LockSpec{ExpiresAt: &monday}, next: LockSpec{ExpiresAt: &monday}, want: want{}},
		"ExpiryRemoved":          {reason: "no expiry protects longest: removing it extends the Lock", old: LockSpec{ExpiresAt: &monday}, next: LockSpec{}, want: want{}},
		"EnforceToAudit":         {reason: "audit refuses nothing: it lowers the Lock", old: LockSpec{Enforcement: EnforcementEnforce}, next: LockSpec{Enforcement: EnforcementAudit}, want: want{LoweredEnforcement, true}},
		"DefaultToAudit":         {reason: "an empty enforcement is Enforce", old: LockSpec{}, next: LockSpec{Enforcement: EnforcementAudit}, want: want{LoweredEnforcement, true}},
		"AuditToEnforce":         {reason: "enforcing is free", old: LockSpec{Enforcement: EnforcementAudit}, next: LockSpec{Enforcement: EnforcementEnforce}, want: want{}},
		"LevelFirst":             {reason: "both lowered: the level is named", old: LockSpec{Level: LevelReadOnly}, next: LockSpec{ExpiresAt: &monday}, want: want{LoweredLevel, true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			what, lowers := Lowers(&tc.old, &tc.next)
			if diff := cmp.Diff(tc.want, want{what, lowers}, cmp.AllowUnexported(want{})); diff != "" {
				t.Errorf("%s\nLowers(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestUnlockMessages(t *testing.T) {
	cases := map[string]struct{ got, want string }{
		"delete": {UnlockDeleteMessage("prod", "db-lock"),
			`deleting Lock prod/db-lock needs the verb "unlock" on locks.core.navique.com (RBAC); ask for the ClusterRole lockguard-unlock`},
		"lower": {UnlockLowerMessage(LoweredLevel, "prod", "db-lock"),
			`lowering the level of Lock prod/db-lock needs the verb "unlock" on locks.core.navique.com (RBAC); ask for the ClusterRole lockguard-unlock`},
	}
	for name, tc := range cases {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s: -want, +got:\n%s", name, diff)
		}
	}
}
