package webhook

import (
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Audit annotation keys of every decision (docs/contract.md rule 14). The API
// server records them in the audit event as "<webhook name>/<key>".
const (
	AuditDecision = "decision"
	AuditGuard    = "guard"
	AuditLocks    = "locks"
	// AuditException names the LockException that let the request
	// through (docs/contract.md rule 20).
	AuditException = "exception"
)

// auditAnnotations are the audit annotations of resp, the decision of
// guard: the decision (allowed, denied, errored), the guard, and the Locks
// that denied it (sorted; at most maxNamed, then how many more, counting
// more that are not in locks, as lockNames does; the CRD guard's as
// namespace/name), so that each value is bounded.
func auditAnnotations(guard string, resp admission.Response, locks []lockv1alpha1.Lock, more int) map[string]string {
	a := map[string]string{AuditDecision: decisionOf(resp), AuditGuard: guard}
	if len(locks) > 0 {
		a[AuditLocks] = strings.Join(lockNames(locks, guard == GuardCRD, more), ",")
	}
	return a
}
