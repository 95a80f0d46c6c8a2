package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestReadOnlyCondition: a ReadOnly Lock says InForce once everything it
// covers carries the label and Pending before; a Lock of any other level
// has no such condition (removed when the level changes back).
func TestReadOnlyCondition(t *testing.T) {
	type cond struct {
		Status  metav1.ConditionStatus
		Reason  string
		Message string
	}
	pending := selectorFrozen(3, 2)
	cases := map[string]struct {
		reason string
		level  lockv1alpha1.LockLevel
		before []metav1.Condition
		obs    observation
		want   *cond
	}{
		"InForce": {
			reason: "Every covered resource labelled.",
			level:  lockv1alpha1.LevelReadOnly,
			obs:    observation{active: true, reason: lockv1alpha1.ReasonActive, readOnly: selectorFrozen(3, 0)},
			want:   &cond{metav1.ConditionTrue, lockv1alpha1.ReasonInForce, inForceMessage},
		},
		"Pending": {
			reason: "Some covered resources not labelled yet: how many.",
			level:  lockv1alpha1.LevelReadOnly,
			obs:    observation{active: true, reason: lockv1alpha1.ReasonActive, readOnly: pending},
			want: &cond{metav1.ConditionFalse, lockv1alpha1.ReasonPending,
				"2 of the 3 resources this Lock covers do not carry the label core.navique.com/read-only=true yet; their updates are not refused until they do"},
		},
		"PendingDefault": {
			reason: "A pass that says nothing of the labels is Pending.",
			level:  lockv1alpha1.LevelReadOnly,
			obs:    observation{reason: lockv1alpha1.ReasonNamespaceNotGuarded},
			want:   &cond{metav1.ConditionFalse, lockv1alpha1.ReasonPending, pendingMessage},
		},
		"MissingTarget": {
			reason: "A missing target: nothing covered, nothing unlabelled.",
			level:  lockv1alpha1.LevelReadOnly,
			obs:    observation{reason: lockv1alpha1.ReasonMissingReference},
			want:   &cond{metav1.ConditionTrue, lockv1alpha1.ReasonInForce, inForceMessage},
		},
		"Invalid": {
			reason: "An invalid scope never freezes anything.",
			level:  lockv1alpha1.LevelReadOnly,
			obs:    observation{reason: lockv1alpha1.ReasonInvalidTarget},
			want:   &cond{metav1.ConditionFalse, lockv1alpha1.ReasonPending, "this Lock's scope is invalid (see its Ready condition): it covers and freezes nothing"},
		},
		"InvalidButLive": {
			reason: "A selector Lock with a kind not served as written is InvalidTarget but still freezes what its served kinds match (docs/contract.md rule 13).",
			level:  lockv1alpha1.LevelReadOnly,
			obs:    observation{reason: lockv1alpha1.ReasonInvalidTarget, readOnly: selectorFrozen(1, 0), live: true},
			want:   &cond{metav1.ConditionTrue, lockv1alpha1.ReasonInForce, inForceMessage},
		},
		"GuardDisabled": {
			reason: "Without an update guard nothing is frozen, labelled or not: never InForce (--read-only-guard=false).",
			level:  lockv1alpha1.LevelReadOnly,
			obs:    observation{active: true, reason: lockv1alpha1.ReasonActive, readOnly: readOnlyObservation{frozen: true, guardOff: true}},
			want:   &cond{metav1.ConditionFalse, lockv1alpha1.ReasonGuardDisabled, guardOffMessage},
		},
		"CanNotDelete": {
			reason: "Back to CanNotDelete: the condition goes.",
			level:  lockv1alpha1.LevelCanNotDelete,
			before: []metav1.Condition{{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonInForce}},
			obs:    observation{active: true, reason: lockv1alpha1.ReasonActive, readOnly: selectorFrozen(1, 0)},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			l := newLock("ns", "l", "", "Stack", "s")
			l.Spec.Level, l.Status.Conditions = tc.level, tc.before
			setReadOnlyCondition(l, tc.obs)
			var got *cond
			if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReadOnly); c != nil {
				got = &cond{c.Status, c.Reason, c.Message}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nsetReadOnlyCondition(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
