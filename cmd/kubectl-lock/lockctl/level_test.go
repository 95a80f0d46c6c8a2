package lockctl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestFreezeState: a ReadOnly Lock's freeze is in force only when its
// ReadOnly condition says so for the Lock's current generation; a
// CanNotDelete Lock has no freeze.
func TestFreezeState(t *testing.T) {
	readOnlyCond := func(status metav1.ConditionStatus, reason string, gen int64) metav1.Condition {
		return metav1.Condition{Type: lockv1alpha1.ConditionReadOnly, Status: status, Reason: reason, Message: reason + " message", ObservedGeneration: gen}
	}
	lock := func(level lockv1alpha1.LockLevel, gen, observed int64, conds ...metav1.Condition) lockv1alpha1.Lock {
		l := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Generation: gen}}
		l.Spec.Level = level
		l.Status.ObservedGeneration, l.Status.Conditions = observed, conds
		return l
	}
	type result struct{ State, Message, Level string }
	cases := map[string]struct {
		reason string
		lock   lockv1alpha1.Lock
		want   result
	}{
		"CanNotDelete": {
			reason: "A CanNotDelete Lock freezes nothing, whatever its conditions say.",
			lock:   lock(lockv1alpha1.LevelCanNotDelete, 1, 1, readOnlyCond(metav1.ConditionTrue, lockv1alpha1.ReasonInForce, 1)),
			want:   result{Level: "CanNotDelete"},
		},
		"DefaultLevel": {
			reason: "No level is the API server's default, CanNotDelete.",
			lock:   lock("", 1, 1),
			want:   result{Level: "CanNotDelete"},
		},
		"InForce": {
			reason: "ReadOnly=True for the current generation is in force.",
			lock:   lock(lockv1alpha1.LevelReadOnly, 2, 2, readOnlyCond(metav1.ConditionTrue, lockv1alpha1.ReasonInForce, 2)),
			want:   result{State: freezeInForce, Message: "InForce message", Level: "ReadOnly (in force)"},
		},
		"Pending": {
			reason: "ReadOnly=False is pending, with the condition's message.",
			lock:   lock(lockv1alpha1.LevelReadOnly, 1, 1, readOnlyCond(metav1.ConditionFalse, lockv1alpha1.ReasonPending, 1)),
			want:   result{State: freezePending, Message: "Pending message", Level: "ReadOnly (pending)"},
		},
		"GuardDisabled": {
			reason: "ReadOnly=False because lockguard serves no update guard: never in force, and said so.",
			lock:   lock(lockv1alpha1.LevelReadOnly, 1, 1, readOnlyCond(metav1.ConditionFalse, lockv1alpha1.ReasonGuardDisabled, 1)),
			want:   result{State: freezeOff, Message: "GuardDisabled message", Level: "ReadOnly (guard disabled)"},
		},
		"NotReported": {
			reason: "A ReadOnly Lock without the condition is pending: a lockguard without ReadOnly never reports it.",
			lock:   lock(lockv1alpha1.LevelReadOnly, 1, 1),
			want:   result{State: freezePending, Message: "lockguard has not reported the Lock's ReadOnly condition (a lockguard without ReadOnly Locks never does)", Level: "ReadOnly (pending)"},
		},
		"LevelJustRaised": {
			reason: "An InForce condition of an older generation (the level was CanNotDelete then) says nothing about this one.",
			lock:   lock(lockv1alpha1.LevelReadOnly, 2, 1, readOnlyCond(metav1.ConditionTrue, lockv1alpha1.ReasonInForce, 1)),
			want:   result{State: freezePending, Message: "lockguard has not reported the ReadOnly condition for the Lock's current generation yet", Level: "ReadOnly (pending)"},
		},
		"ConditionOlderThanStatus": {
			reason: "The condition's own observedGeneration counts too.",
			lock:   lock(lockv1alpha1.LevelReadOnly, 2, 2, readOnlyCond(metav1.ConditionTrue, lockv1alpha1.ReasonInForce, 1)),
			want:   result{State: freezePending, Message: "lockguard has not reported the ReadOnly condition for the Lock's current generation yet", Level: "ReadOnly (pending)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var got result
			got.State, got.Message = freezeState(&tc.lock)
			got.Level = levelString(&tc.lock)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nfreezeState, levelString: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
