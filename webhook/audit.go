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
//
// Without Locks (every allowed review) the map is one of sharedAudit's, the
// same for every review of its guard and decision: read-only (finish
// copies it before an exception's use names the exception in it).
func auditAnnotations(guard string, resp admission.Response, locks []lockv1alpha1.Lock, more int) map[string]string {
	decision := decisionOf(resp)
	if len(locks) == 0 {
		if a := sharedAudit[[2]string{guard, decision}]; a != nil {
			return a
		}
	}
	a := map[string]string{AuditDecision: decision, AuditGuard: guard}
	if len(locks) > 0 {
		a[AuditLocks] = strings.Join(lockNames(locks, guard == GuardCRD, more), ",")
	}
	return a
}

// sharedAudit are the audit annotations of the decisions that name no
// Lock, by guard and decision: read-only.
var sharedAudit = func() map[[2]string]map[string]string {
	shared := map[[2]string]map[string]string{}
	for _, guard := range guardNames {
		for _, decision := range decisionNames {
			shared[[2]string{guard, decision}] = map[string]string{AuditDecision: decision, AuditGuard: guard}
		}
	}
	return shared
}()
