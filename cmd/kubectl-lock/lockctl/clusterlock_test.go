package lockctl

import (
	"strings"
	"testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestClusterRoleHint: refusals of ClusterLock operations name the
// ClusterRole lacked; a Lock's refusal is not taken for one.
func TestClusterRoleHint(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{lockv1alpha1.ClusterUnlockMessage("deleting", "namespace-prod"), lockv1alpha1.ClusterUnlockRole},
		{`User "u" cannot delete resource "clusterlocks" in API group "core.navique.com" at the cluster scope`, lockv1alpha1.ClusterUnlockRole},
		{`User "u" cannot create resource "clusterlocks" in API group "core.navique.com" at the cluster scope`, lockv1alpha1.ClusterLockRole},
		{`User "u" cannot list resource "clusterlocks" in API group "core.navique.com" at the cluster scope`, lockv1alpha1.ClusterLockRole},
		{`User "u" cannot patch resource "clusterlocks" in API group "core.navique.com" at the cluster scope`, lockv1alpha1.ClusterLockRole},
		{`User "u" cannot update resource "clusterlocks" in API group "core.navique.com" at the cluster scope`, lockv1alpha1.ClusterLockRole},
		{`User "u" cannot deletecollection resource "clusterlocks" in API group "core.navique.com" at the cluster scope`, lockv1alpha1.ClusterUnlockRole},
		{lockv1alpha1.ClusterUnlockMessage("lowering the level of", "namespace-prod"), lockv1alpha1.ClusterUnlockRole},
		{`deleting Lock a ` + lockv1alpha1.UnlockRefusal, ""},
		{`User "u" cannot delete resource "locks" in API group "core.navique.com"`, ""},
	} {
		got := clusterRoleHint(tc.msg)
		if (tc.want == "") != (got == "") || !strings.HasSuffix(got, tc.want) {
			t.Errorf("clusterRoleHint(%q) = %q; want the role %q", tc.msg, got, tc.want)
		}
	}
}

// TestIsClusterLockType: kubectl lock show takes ClusterLocks as kubectl
// spells their type.
func TestIsClusterLockType(t *testing.T) {
	for typ, want := range map[string]bool{"clusterlock": true, "clusterlocks": true, "ClusterLock": true, "clusterlocks.core.navique.com": true, "lock": false, "clusterlocks.example.com": false} {
		if got := isClusterLockType(typ); got != want {
			t.Errorf("isClusterLockType(%q) = %v; want %v", typ, got, want)
		}
	}
}
