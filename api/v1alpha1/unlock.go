package v1alpha1

import "fmt"

// Who may lift a Lock (docs/contract.md rules 9 and 18): deleting a Lock,
// or an update that lowers what it protects (Lowers), needs UnlockVerb on
// the Lock besides RBAC's delete or update. The chart checks it in the API
// server (a ValidatingAdmissionPolicy with an authorizer check, 1.30+) or,
// before 1.30, in a webhook entry whose matchConditions make the same
// check and send lockguard only the requests of principals without the
// verb (webhook.UnlockHandler). Both refuse with UnlockMessage.

// UnlockVerb is the RBAC verb on locks.core.navique.com that deleting a
// Lock, or lowering what it protects, needs besides delete or update. RBAC
// knows no such verb: a Role grants it by name (resourceNames scope it to
// some Locks), and a principal that holds every verb ("*") has it.
const UnlockVerb = "unlock"

// BreakGlassVerb is the RBAC verb on locks.core.navique.com that creating
// a LockException naming a Lock needs (docs/contract.md rule 20): lockguard
// checks it, on every Lock the exception names, with a
// SubjectAccessReview of the creator's identity.
const BreakGlassVerb = "break-glass"

// The ClusterRoles the chart ships for Locks, named alike in every
// release: lockguard is installed once per cluster (its CRD and webhook
// configuration are cluster-wide).
const (
	// ViewRole reads Locks (get, list, watch); aggregated into the
	// built-in view, edit and admin roles.
	ViewRole = "lockguard-view"
	// EditRole creates, updates, patches and deletes Locks, without
	// UnlockVerb: its holders can lock but not unlock. Aggregated into the
	// built-in edit and admin roles.
	EditRole = "lockguard-edit"
	// UnlockRole grants UnlockVerb on Locks; not aggregated: it is bound
	// deliberately, with edit (or lockguard-edit) for delete and update.
	UnlockRole = "lockguard-unlock"
	// BreakGlassRole grants BreakGlassVerb on Locks, and creating,
	// reading and deleting LockExceptions; not aggregated.
	BreakGlassRole = "lockguard-break-glass"
)

// Lowered names what of a Lock's protection an update lowers, for
// UnlockMessage ("lowering the <Lowered> of Lock ...").
type Lowered string

const (
	// LoweredLevel: the level goes from ReadOnly to CanNotDelete.
	LoweredLevel Lowered = "level"
	// LoweredExpiry: expiresAt is set on a Lock that had none, or moved
	// earlier (docs/contract.md rule 19). Removing it, or moving it later,
	// extends the Lock and is free.
	LoweredExpiry Lowered = "expiresAt"
	// LoweredEnforcement: the enforcement goes from Enforce (or unset) to
	// Audit (docs/contract.md rule 20).
	LoweredEnforcement Lowered = "enforcement"
)

// Lowers reports what the update of a Lock from old to next lowers, and
// whether it lowers anything: it then needs UnlockVerb (docs/contract.md
// rule 18). An empty level is CanNotDelete (the CRD's default). The scope
// (targetRef, selector) cannot change at all (the CRD's CEL rules). The
// chart's policy mirrors each case as one validation
// (lockguard.unlockPolicy): a case added here is added there.
func Lowers(old, next *LockSpec) (Lowered, bool) {
	if old.Level == LevelReadOnly && next.Level != LevelReadOnly {
		return LoweredLevel, true
	}
	if next.ExpiresAt != nil && (old.ExpiresAt == nil || next.ExpiresAt.Before(old.ExpiresAt)) {
		return LoweredExpiry, true
	}
	if old.Enforcement != EnforcementAudit && next.Enforcement == EnforcementAudit {
		return LoweredEnforcement, true
	}
	return "", false
}

// UnlockDeleteMessage is the refusal of deleting Lock namespace/name by a
// principal without UnlockVerb, word for word the same from the chart's
// policy and from lockguard's webhook.
func UnlockDeleteMessage(namespace, name string) string {
	return unlockMessage("deleting", namespace, name)
}

// UnlockLowerMessage is the refusal of an update that lowers what of Lock
// namespace/name by a principal without UnlockVerb.
func UnlockLowerMessage(what Lowered, namespace, name string) string {
	return unlockMessage("lowering the "+string(what)+" of", namespace, name)
}

// UnlockRefusal is the part of UnlockDeleteMessage and UnlockLowerMessage
// that names the verb: a refusal that holds it is one for want of
// UnlockVerb.
const UnlockRefusal = `needs the verb "` + UnlockVerb + `" on locks.` + Group + ` (RBAC)`

func unlockMessage(action, namespace, name string) string {
	return fmt.Sprintf("%s Lock %s/%s %s; ask for the ClusterRole %s", action, namespace, name, UnlockRefusal, UnlockRole)
}

// BreakGlassRefusal is the part of BreakGlassMessage that names the verb.
const BreakGlassRefusal = `needs the verb "` + BreakGlassVerb + `" on locks.` + Group + ` (RBAC)`

// BreakGlassMessage is lockguard's refusal of creating a LockException
// that names Lock namespace/name by a principal without BreakGlassVerb on
// it (docs/contract.md rule 20).
func BreakGlassMessage(namespace, name string) string {
	return fmt.Sprintf("creating a LockException that pierces Lock %s/%s %s; ask for the ClusterRole %s", namespace, name, BreakGlassRefusal, BreakGlassRole)
}
