package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestReadyMessages pins the Ready messages users read on an active Lock
// and on one whose target does not exist, word for word: the suites take
// them from ActiveMessage and MissingMessage (framework.ActiveStatus,
// framework.MissingStatus), so this is where their text is asserted.
func TestReadyMessages(t *testing.T) {
	lock := func(spec lockv1alpha1.LockSpec) *lockv1alpha1.Lock {
		return &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "keep"}, Spec: spec}
	}
	web := lockv1alpha1.TargetReference{Kind: "Stack", Name: "web"}
	cases := map[string]struct {
		reason string
		got    string
		want   string
	}{
		"TargetRef": {
			reason: "A targetRef Lock names its target.",
			got:    ActiveMessage(lock(lockv1alpha1.LockSpec{TargetRef: web})),
			want:   `deleting Stack "web" is denied while this Lock exists`,
		},
		"TargetRefWithReason": {
			reason: "The Lock's reason follows a colon.",
			got:    ActiveMessage(lock(lockv1alpha1.LockSpec{TargetRef: web, Reason: "quarter close"})),
			want:   `deleting Stack "web" is denied while this Lock exists: quarter close`,
		},
		"Expiring": {
			reason: "An expiring Lock says until when, before its reason.",
			got:    ActiveMessage(lock(lockv1alpha1.LockSpec{TargetRef: web, Reason: "freeze", ExpiresAt: &metav1.Time{Time: time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)}})),
			want:   `deleting Stack "web" is denied while this Lock exists, until it expires at 2026-12-07T06:00:00Z: freeze`,
		},
		"Expired": {
			reason: "An expired Lock says since when, and that it is kept.",
			got:    ExpiredMessage(lock(lockv1alpha1.LockSpec{TargetRef: web, ExpiresAt: &metav1.Time{Time: time.Date(2026, 12, 7, 6, 0, 0, 0, time.UTC)}})),
			want:   `this Lock expired at 2026-12-07T06:00:00Z and protects nothing any more; it is kept as a record until it is deleted`,
		},
		"EmptySelector": {
			reason: "The empty selector covers the namespace and everything in it.",
			got:    ActiveMessage(lock(lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{}})),
			want:   `deleting namespace "shop" or any resource in it is denied while this Lock exists`,
		},
		"Selector": {
			reason: "A selector Lock covers what its selector matches in its namespace.",
			got:    ActiveMessage(lock(lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}, Reason: "migration"})),
			want:   `deleting the resources of namespace "shop" that this Lock's selector matches is denied while this Lock exists: migration`,
		},
		"Missing": {
			reason: "A missing target is named with its namespace, and its deletion is denied once created.",
			got:    MissingMessage("Stack", "web", "shop"),
			want:   `Stack "web" not found in namespace "shop"; its deletion will be denied as soon as it is created`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("%s\nmessage: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
