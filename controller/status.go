package controller

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// observation is what a Lock's status should say.
type observation struct {
	active  bool
	reason  string
	message string // for an active Lock, the message is ActiveMessage's
	// protected is what the Lock covers now; nil: nothing.
	protected *lockv1alpha1.ProtectedStatus
	// readOnly says whether what the Lock covers carries ReadOnlyLabel,
	// for the ReadOnly condition of a ReadOnly Lock.
	readOnly readOnlyObservation
	// live: an InvalidTarget Lock that is live all the same (a selector
	// Lock with a kind not served as written: selectorkinds.go), so it
	// freezes what it covers, as readOnly says.
	live bool
}

// readOnlyObservation is what the ReadOnly condition of a ReadOnly Lock
// should say.
type readOnlyObservation struct {
	// frozen: every resource the Lock covers carries ReadOnlyLabel, so
	// their updates reach the update guard (InForce).
	frozen bool
	// message of a Pending condition; "" for pendingMessage.
	message string
	// guardOff: lockguard serves no update guard (Options.DisableReadOnlyGuard;
	// for a ClusterLock, no ClusterLock guard either), so nothing is frozen
	// whatever the labels say (GuardDisabled).
	guardOff bool
}

// freezing returns obs with readOnly ro.
func (obs observation) freezing(ro readOnlyObservation) observation {
	obs.readOnly = ro
	return obs
}

// selectorFrozen is the readOnlyObservation of a selector Lock that covers
// count resources, unlabelled of which do not carry ReadOnlyLabel yet.
func selectorFrozen(count int32, unlabelled int) readOnlyObservation {
	if unlabelled == 0 {
		return readOnlyObservation{frozen: true}
	}
	return readOnlyObservation{message: fmt.Sprintf(
		"%d of the %d resources this Lock covers do not carry the label %s=true yet; their updates are not refused until they do",
		unlabelled, count, lockv1alpha1.ReadOnlyLabel)}
}

// pendingMessage is the default message of a Pending ReadOnly condition.
const pendingMessage = "the resources this Lock covers do not all carry the label " + lockv1alpha1.ReadOnlyLabel + "=true yet; their updates are not refused until they do"

// guardOffMessage is the message of a GuardDisabled ReadOnly condition.
const guardOffMessage = "lockguard runs without its update guard (the chart's mode policy or guards.readOnly.enabled=false: --read-only-guard=false): updates of the resources this Lock covers are not refused; deleting them is still denied"

// inForceMessage is the message of an InForce ReadOnly condition.
const inForceMessage = "updates of the spec and metadata of the resources this Lock covers are refused, except by the principals lockguard exempts; their status can change"

// setReadOnlyCondition sets the ReadOnly condition of lock, a ReadOnly
// Lock, from obs, or removes it from a Lock of any other level. A Lock
// whose target does not exist covers nothing, so everything it covers is
// labelled (InForce: the target is frozen once created and labelled, the
// window README states); one whose scope is invalid never freezes
// anything (Pending), unless it is live all the same (obs.live).
func setReadOnlyCondition(lock *lockv1alpha1.Lock, obs observation) {
	if lock.Spec.Level != lockv1alpha1.LevelReadOnly {
		meta.RemoveStatusCondition(&lock.Status.Conditions, lockv1alpha1.ConditionReadOnly)
		return
	}
	ro := obs.readOnly
	switch obs.reason {
	case lockv1alpha1.ReasonMissingReference:
		ro = readOnlyObservation{frozen: true}
	case lockv1alpha1.ReasonInvalidTarget:
		if obs.live {
			break
		}
		ro = readOnlyObservation{message: "this Lock's scope is invalid (see its Ready condition): it covers and freezes nothing"}
	case lockv1alpha1.ReasonExpired:
		ro = readOnlyObservation{message: "this Lock has expired (see its Ready condition): it freezes nothing"}
	case lockv1alpha1.ReasonAudit:
		msg := auditReadOnlyMessage
		if nounOf(lock) == "ClusterLock" {
			msg = auditClusterReadOnlyMessage
		}
		meta.SetStatusCondition(&lock.Status.Conditions, metav1.Condition{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionFalse,
			Reason: lockv1alpha1.ReasonAudit, Message: msg, ObservedGeneration: lock.Generation})
		return
	}
	c := metav1.Condition{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonInForce,
		Message: inForceMessage, ObservedGeneration: lock.Generation}
	switch {
	case obs.readOnly.guardOff:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, lockv1alpha1.ReasonGuardDisabled, guardOffMessage
	case !ro.frozen:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, lockv1alpha1.ReasonPending, ro.message
		if c.Message == "" {
			c.Message = pendingMessage
		}
	}
	meta.SetStatusCondition(&lock.Status.Conditions, c)
}

// auditReadOnlyMessage is the message of the ReadOnly condition of a
// ReadOnly Lock in Audit enforcement.
const auditReadOnlyMessage = "this Lock is in Audit enforcement (see its Ready condition): it freezes nothing; each update it would refuse is allowed with a warning and recorded in status.lastWouldDeny"

// auditClusterReadOnlyMessage is auditReadOnlyMessage of a ClusterLock,
// whose would-be refusals are recorded in its status the same way.
const auditClusterReadOnlyMessage = "this ClusterLock is in Audit enforcement (see its Ready condition): it freezes nothing; each update it would refuse is allowed with a warning and recorded in status.lastWouldDeny"

// audited returns obs as the status of lock says it: for a Lock in Audit
// enforcement (Lock.Enforces false) that would otherwise be active, or
// wait only for its namespace's label (which guards nothing for it), not
// active, Ready True with reason Audit (docs/contract.md rule 20): it
// refuses nothing, as the guards and the annotation (enforcingNames) agree.
// What it covers is still said. An expired Lock, or one whose scope is
// invalid or whose target is missing, keeps saying so whatever its
// enforcement.
func audited(lock *lockv1alpha1.Lock, obs observation) observation {
	if lock.Enforces() || !(obs.active || obs.reason == lockv1alpha1.ReasonNamespaceNotGuarded) {
		return obs
	}
	obs.active, obs.reason, obs.message = false, lockv1alpha1.ReasonAudit, AuditMessage(lock)
	return obs
}

// AuditMessage is the Ready message of a live Lock in Audit enforcement:
// that it refuses nothing, where what it would refuse goes, and its
// spec.reason if it gives one.
func AuditMessage(lock *lockv1alpha1.Lock) string {
	msg := "this Lock is in Audit enforcement and refuses nothing: each request it would refuse is allowed with a warning and recorded in status.lastWouldDeny; set spec.enforcement to Enforce to protect"
	if nounOf(lock) == "ClusterLock" {
		msg = "this ClusterLock is in Audit enforcement and refuses nothing: each request it would refuse is allowed with a warning and recorded in status.lastWouldDeny; set spec.enforcement to Enforce to protect"
	}
	if lock.Spec.Reason != "" {
		msg += ": " + lock.Spec.Reason
	}
	return msg
}

// covering returns obs with protected p.
func (obs observation) covering(p *lockv1alpha1.ProtectedStatus) observation {
	obs.protected = p
	return obs
}

// MissingMessage is the Ready message of a Lock whose target, kind name
// in namespace, does not exist (MissingReference).
func MissingMessage(kind, name, namespace string) string {
	return fmt.Sprintf("%s %q not found in namespace %q; its deletion will be denied as soon as it is created", kind, name, namespace)
}

// ActiveMessage is the Ready message of an active Lock or ClusterLock:
// what it denies, until when if it expires, and its spec.reason if it
// gives one (a Lock's: lockv1alpha1.Lock.ActiveMessage, which lockguard's
// cache derives it from).
func ActiveMessage(lock *lockv1alpha1.Lock) string {
	if nounOf(lock) == "Lock" {
		return lock.ActiveMessage()
	}
	msg := fmt.Sprintf("deleting %s %q is denied while this ClusterLock exists", lock.Spec.TargetRef.Kind, lock.Spec.TargetRef.Name)
	if lock.Spec.Selector != nil {
		msg = fmt.Sprintf("deleting the objects this ClusterLock's selector matches is denied while this ClusterLock exists (an object created or labelled into it later: once lockguard labels it, within about %s)", clusterLockRecheck)
	}
	return msg + lock.ActiveMessageEnd()
}

// statusPatch is a JSON merge patch that sets the whole status to s, if
// the Lock is still at resourceVersion. It is written out rather than
// computed from the cached Lock: a diff against a status that lacks
// "active" would leave out a false active, and the Lock would show no
// ACTIVE at all. The resourceVersion makes a write from a cache that
// lags (a pass right after another pass over the same target) fail with
// a conflict, rather than write the same status again and record its
// Event twice.
//
// The resourceVersion also keeps the fields other writers own: s carries
// status.lastDenied as the cached Lock has it, which is the Lock's own
// at that resourceVersion, so a denial written since (by any replica,
// internal/denials) makes this patch conflict rather than erase it; and a
// status without lastDenied leaves it out of the patch. An empty
// protected.resources is written as null: a merge patch that left it out
// would keep the names of resources the Lock no longer covers.
func statusPatch(resourceVersion string, s lockv1alpha1.LockStatus) client.Patch {
	status := map[string]any{}
	raw, _ := json.Marshal(s)
	_ = json.Unmarshal(raw, &status)
	if p, ok := status["protected"].(map[string]any); ok && p["resources"] == nil {
		p["resources"] = nil
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": resourceVersion}, "status": status})
	return client.RawPatch(types.MergePatchType, data)
}

// writeStatus patches the Lock's status to obs, if it differs, and records
// an Event when its Ready reason changes.
func (r *reconciler) writeStatus(ctx context.Context, lock *lockv1alpha1.Lock, obs observation) error {
	return r.writeStatusOf(ctx, lock, lock, obs)
}

// writeStatusOf is writeStatus of obj, a Lock (lock itself) or a
// ClusterLock (lock its AsLock view): the status is computed on lock, and
// obj's is patched and carries the Event.
func (r *reconciler) writeStatusOf(ctx context.Context, obj client.Object, lock *lockv1alpha1.Lock, obs observation) error {
	obs = audited(lock, obs)
	if obs.active {
		obs.message = ActiveMessage(lock)
	}
	// The status as read, to tell whether the pass changes it: the rest
	// of the Lock is not written, and not copied.
	before := lock.Status.DeepCopy()
	status := metav1.ConditionFalse
	if obs.active || obs.reason == lockv1alpha1.ReasonAudit {
		status = metav1.ConditionTrue
	}
	lock.Status.Active = obs.active
	lock.Status.ObservedGeneration = lock.Generation
	// The same for a given Lock at every pass (its scope cannot change):
	// written once, with the rest of the status.
	lock.Status.Scope = lock.ScopeString()
	lock.Status.Protected = obs.protected
	if lock.Status.Protected == nil {
		lock.Status.Protected = protectedNone()
	}
	meta.SetStatusCondition(&lock.Status.Conditions, metav1.Condition{
		Type:               lockv1alpha1.ConditionReady,
		Status:             status,
		Reason:             obs.reason,
		Message:            obs.message,
		ObservedGeneration: lock.Generation,
	})
	obs.readOnly.guardOff = obs.readOnly.guardOff || !r.readOnlyGuard
	setReadOnlyCondition(lock, obs)
	if equality.Semantic.DeepEqual(*before, lock.Status) {
		return nil
	}
	if c, ok := obj.(*lockv1alpha1.ClusterLock); ok {
		c.Status = lock.Status
	}
	noun := nounOf(lock)
	if err := r.client.Status().Patch(ctx, obj, statusPatch(lock.ResourceVersion, lock.Status)); err != nil {
		if apierrors.IsConflict(err) {
			// The cache has not seen the Lock's latest version yet; when
			// it does, the Lock's watch brings its target here again.
			ctrl.LoggerFrom(ctx).V(1).Info(noun+" changed since the cache read it", "lock", client.ObjectKeyFromObject(obj))
			return nil
		}
		return client.IgnoreNotFound(fmt.Errorf("writing the status of %s %s: %w", noun, client.ObjectKeyFromObject(obj), err))
	}
	if was := meta.FindStatusCondition(before.Conditions, lockv1alpha1.ConditionReady); r.events != nil && (was == nil || was.Reason != obs.reason) {
		eventType := corev1.EventTypeWarning
		if obs.active || obs.reason == lockv1alpha1.ReasonExpired || obs.reason == lockv1alpha1.ReasonAudit {
			eventType = corev1.EventTypeNormal
		}
		r.events.Eventf(obj, nil, eventType, obs.reason, "Reconcile", "%s", obs.message)
	}
	return nil
}

// nounOf is "Lock", or "ClusterLock" for the AsLock view of a ClusterLock
// (a Lock always has a namespace; a ClusterLock never does).
func nounOf(lock *lockv1alpha1.Lock) string {
	if lock.Namespace == "" {
		return "ClusterLock"
	}
	return "Lock"
}
