package lockctl

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func TestWithRoleHint(t *testing.T) {
	locks := schema.GroupResource{Group: lockv1alpha1.Group, Resource: "locks"}
	rbac := func(verb string) error {
		return apierrors.NewForbidden(locks, "", errors.New(`User "ann" cannot `+verb+` resource "locks" in API group "core.navique.com" in the namespace "prod"`))
	}
	unlock := apierrors.NewForbidden(locks, "db-lock", errors.New(`ValidatingAdmissionPolicy 'lockguard-unlock' with binding 'lockguard-unlock' denied request: `+
		lockv1alpha1.UnlockDeleteMessage("prod", "db-lock")))
	other := apierrors.NewForbidden(schema.GroupResource{Group: lockv1alpha1.Group, Resource: "stacks"}, "forge", errors.New("resource is protected by Lock(s) [a]"))
	rbacExc := apierrors.NewForbidden(schema.GroupResource{Group: lockv1alpha1.Group, Resource: "lockexceptions"}, "",
		errors.New(`User "ann" cannot create resource "lockexceptions" in API group "core.navique.com" in the namespace "prod"`))
	cases := map[string]struct {
		reason string
		err    error
		want   string
	}{
		"Unlock": {reason: "the refusal for want of unlock names lockguard-unlock", err: unlock,
			want: unlock.Error() + "\nYou lack the verb \"unlock\" on this Lock: ask for a RoleBinding to the ClusterRole lockguard-unlock in its namespace (or a Role granting \"unlock\" on this Lock alone, with resourceNames)"},
		"Create": {reason: "creating Locks is lockguard-edit", err: rbac("create"),
			want: rbac("create").Error() + "\nYou lack the verb \"create\" on Locks: ask for the ClusterRole lockguard-edit (aggregated into the built-in edit and admin ClusterRoles) in this namespace"},
		"List": {reason: "reading Locks is lockguard-view", err: rbac("list"),
			want: rbac("list").Error() + "\nYou lack the verb \"list\" on Locks: ask for the ClusterRole lockguard-view (aggregated into the built-in view, edit and admin ClusterRoles) in this namespace"},
		"Exceptions": {reason: "RBAC's refusal on lockexceptions is lockguard-break-glass", err: rbacExc,
			want: rbacExc.Error() + "\nYou lack the verb \"break-glass\" on these Locks, or access to LockExceptions: ask for a RoleBinding to the ClusterRole lockguard-break-glass in this namespace"},
		"Other": {reason: "a Lock's own denial is no role missing", err: other, want: other.Error()},
		"NotForbidden": {reason: "only refusals", err: errors.New(`cannot create resource "locks" in API group "core.navique.com"`),
			want: `cannot create resource "locks" in API group "core.navique.com"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := withRoleHint(tc.err)
			if diff := cmp.Diff(tc.want, got.Error()); diff != "" {
				t.Errorf("%s\nwithRoleHint(...): -want, +got:\n%s", tc.reason, diff)
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("%s: withRoleHint(...) does not wrap the refusal", tc.reason)
			}
		})
	}
	if withRoleHint(nil) != nil {
		t.Error("withRoleHint(nil) != nil")
	}
}
