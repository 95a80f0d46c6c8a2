package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestActiveMessage: the Ready message of an active Lock, as lockguard
// has always written it (controller.ActiveMessage before issue 38 moved
// it here).
func TestActiveMessage(t *testing.T) {
	expires := metav1.NewTime(time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, tc := range []struct {
		lock Lock
		want string
	}{
		{Lock{Spec: LockSpec{TargetRef: TargetReference{Kind: "Stack", Name: "web"}}},
			`deleting Stack "web" is denied while this Lock exists`},
		{Lock{Spec: LockSpec{TargetRef: TargetReference{Kind: "Stack", Name: "web"}, Reason: "prod"}},
			`deleting Stack "web" is denied while this Lock exists: prod`},
		{Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: LockSpec{Selector: &LockSelector{}, ExpiresAt: &expires}},
			`deleting namespace "team-a" or any resource in it is denied while this Lock exists, until it expires at 2027-01-02T03:04:05Z`},
		{Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}, Spec: LockSpec{Selector: &LockSelector{MatchLabels: map[string]string{"app": "web"}}, Reason: "prod"}},
			`deleting the resources of namespace "team-a" that this Lock's selector matches is denied while this Lock exists: prod`},
	} {
		if got := tc.lock.ActiveMessage(); got != tc.want {
			t.Errorf("ActiveMessage() = %q, want %q", got, tc.want)
		}
	}
}
