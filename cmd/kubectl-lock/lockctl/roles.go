package lockctl

import (
	"fmt"
	"regexp"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// rbacRefusal matches RBAC's refusal of a verb on Locks ("User "u" cannot
// delete resource "locks" in API group "core.navique.com" ...").
var rbacRefusal = regexp.MustCompile(`cannot (\S+) resource "locks" in API group "` + regexp.QuoteMeta(lockv1alpha1.Group) + `"`)

// exceptionRefusal matches RBAC's refusal of a verb on LockExceptions.
var exceptionRefusal = regexp.MustCompile(`cannot \S+ resource "lockexceptions" in API group "` + regexp.QuoteMeta(lockv1alpha1.Group) + `"`)

// withRoleHint returns err, followed by the ClusterRole the user lacks,
// when err is a refusal of an operation on Locks: lockguard's refusal for
// want of the unlock verb (lockv1alpha1.UnlockRefusal, from the chart's
// policy or webhook: lockguard-unlock), or RBAC's of a verb on locks
// (get, list, watch: lockguard-view; any other: lockguard-edit), or the
// refusal of a LockException for want of break-glass, or RBAC's of a verb
// on lockexceptions (lockguard-break-glass). Any other
// error is returned as it is.
func withRoleHint(err error) error {
	if err == nil || !apierrors.IsForbidden(err) {
		return err
	}
	msg := err.Error()
	if strings.Contains(msg, lockv1alpha1.UnlockRefusal) {
		return fmt.Errorf("%w\nYou lack the verb %q on this Lock: ask for a RoleBinding to the ClusterRole %s in its namespace "+
			"(or a Role granting %q on this Lock alone, with resourceNames)",
			err, lockv1alpha1.UnlockVerb, lockv1alpha1.UnlockRole, lockv1alpha1.UnlockVerb)
	}
	if strings.Contains(msg, lockv1alpha1.BreakGlassRefusal) || exceptionRefusal.MatchString(msg) {
		return fmt.Errorf("%w\nYou lack the verb %q on these Locks, or access to LockExceptions: ask for a RoleBinding to the ClusterRole %s in this namespace",
			err, lockv1alpha1.BreakGlassVerb, lockv1alpha1.BreakGlassRole)
	}
	if hint := clusterRoleHint(msg); hint != "" {
		return fmt.Errorf("%w\n%s", err, hint)
	}
	m := rbacRefusal.FindStringSubmatch(msg)
	if m == nil {
		return err
	}
	role, into := lockv1alpha1.EditRole, "edit and admin"
	switch m[1] {
	case "get", "list", "watch":
		role, into = lockv1alpha1.ViewRole, "view, edit and admin"
	}
	return fmt.Errorf("%w\nYou lack the verb %q on Locks: ask for the ClusterRole %s (aggregated into the built-in %s ClusterRoles) in this namespace",
		err, m[1], role, into)
}
