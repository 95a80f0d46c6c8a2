package lockctl

import (
	"fmt"

	"github.com/spf13/cobra"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Locks in Audit enforcement (docs/contract.md rule 20): kubectl lock
// --audit creates one; it refuses nothing and records what it would
// refuse in status.lastWouldDeny.

// addAuditFlag registers --audit on cmd.
func addAuditFlag(cmd *cobra.Command, o *lockOptions) {
	cmd.Flags().BoolVar(&o.audit, "audit", false, "Create the Lock in Audit enforcement (spec.enforcement Audit): it refuses nothing, and each request it would refuse is allowed with a warning and recorded in its status.lastWouldDeny. kubectl lock update NAME --enforce makes it refuse.")
}

// enforcementOf returns the Lock's enforcement: spec.enforcement, Enforce
// when unset (the API server's default).
func enforcementOf(l *lockv1alpha1.Lock) lockv1alpha1.Enforcement {
	if l.Spec.Enforcement == "" {
		return lockv1alpha1.EnforcementEnforce
	}
	return l.Spec.Enforcement
}

// sameEnforcement returns an error when the existing Lock refuses less
// than the one kubectl lock would create: asked to enforce, it is in
// Audit. An enforcing existing Lock, asked for Audit, is kept (with a
// warning): it refuses more.
func sameEnforcement(existing, want *lockv1alpha1.Lock, ns string) error {
	if want.Enforces() && !existing.Enforces() && ns == "" {
		return fmt.Errorf("%s %q already exists in Audit enforcement, which refuses nothing: make it refuse (kubectl lock update clusterlock/%s --enforce) or choose another name with --name",
			clusterLockGroupResource, existing.Name, existing.Name)
	}
	if want.Enforces() && !existing.Enforces() {
		return fmt.Errorf("%s %q already exists in Audit enforcement, which refuses nothing: make it refuse (kubectl lock update %s -n %s --enforce) or choose another name with --name",
			lockGroupResource, existing.Name, existing.Name, ns)
	}
	return nil
}

// auditDone is what kubectl lock says once a Lock (or a ClusterLock: no
// namespace) in Audit enforcement is live: what it covers, that it refuses
// nothing, where what it would refuse goes, and how to make it refuse.
func auditDone(l *lockv1alpha1.Lock) string {
	would := "deleting what it covers"
	if readOnly(l) {
		would += ", or changing its spec or metadata"
	}
	expires := ""
	if l.Spec.ExpiresAt != nil {
		expires = fmt.Sprintf("; it expires at %s", l.ExpiresAtString())
	}
	if l.Namespace == "" {
		return fmt.Sprintf("the ClusterLock %s on %s is in Audit enforcement: it refuses nothing; each request it would refuse (%s) is allowed with a warning and recorded in its status.lastWouldDeny (kubectl lock show clusterlock/%s); kubectl lock update clusterlock/%s --enforce makes it refuse%s",
			l.Name, scopeString(l), would, l.Name, l.Name, expires)
	}
	return fmt.Sprintf("the Lock %s on %s in namespace %s is in Audit enforcement: it refuses nothing; each request it would refuse (%s) is allowed with a warning and recorded in its status.lastWouldDeny (kubectl lock show %s -n %s); kubectl lock update %s -n %s --enforce makes it refuse%s",
		l.Name, scopeString(l), l.Namespace, would, l.Name, l.Namespace, l.Name, l.Namespace, expires)
}
