package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// The update guard of ReadOnly ClusterLocks (docs/contract.md rules 16 and
// 22): an UPDATE (a PATCH arrives as one) of a cluster-scoped object that
// a live, enforcing ReadOnly ClusterLock names is refused when it changes
// what ReadOnly freezes (lockv1alpha1.FrozenChange: spec and metadata, not
// status, not lockguard's own annotation and labels), unless an exempt
// principal sends it (lockguard itself and --read-only-exempt, as for
// Locks). The chart's cluster-update entry sends lockguard only the
// updates of the main resource of objects that carry
// lockv1alpha1.ReadOnlyLabel (objectSelector, matched on the old and the
// new object), so the status subresource never reaches it, and an object
// under no ReadOnly ClusterLock never waits for lockguard on an update.

// ClusterUpdatePath is where lockguard answers the UPDATE of a
// cluster-scoped object labelled lockv1alpha1.ReadOnlyLabel.
const ClusterUpdatePath = "/validate-cluster-update"

// ClusterUpdateHandler returns the http.Handler of ClusterUpdatePath.
func (h *ClusterLockHandler) ClusterUpdateHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transport.ServeReview(h.gate, w, r, transport.DecodeReview, h.DecideUpdate)
	})
}

// DecideUpdate answers an UPDATE of a cluster-scoped object: allowed when
// it is not one (an operation other than UPDATE, a namespaced object,
// the status subresource), when an exempt principal sends it
// (ClusterLockConfig.Exempt; none without it), or when it changes nothing
// ReadOnly freezes; otherwise refused when a live, enforcing ReadOnly
// ClusterLock names the object (naming the ClusterLocks and the level),
// allowed with a warning when only audit ones do. A subresource other
// than status (the chart's entry sends none) is a change. It answers
// Errored, so that the API server refuses the update, when it cannot read
// the objects or the ClusterLocks.
func (h *ClusterLockHandler) DecideUpdate(ctx context.Context, ar admission.Request) admission.Response {
	start := time.Now()
	req := Request{Kind: ar.Kind, Name: ar.Name, Namespace: ar.Namespace, Operation: ar.Operation,
		UserInfo: UserInfo{Username: ar.UserInfo.Username}, DryRun: ar.DryRun != nil && *ar.DryRun}
	d := decision{guard: GuardReadOnly, resp: admission.Allowed("")}
	var exempt *Exemptions
	if h.c.Exempt != nil {
		e := *h.c.Exempt
		if e.Self == nil {
			e.Self = h.c.Self
		}
		exempt = &e
	}
	switch {
	case ar.Operation != admissionv1.Update:
		d.resp = admission.Allowed(notGuarded[admissionv1.Update])
	case ar.SubResource == StatusSubresource:
		d.resp = admission.Allowed("the status subresource is never frozen")
	case ar.Namespace != "" && (ar.Kind.Group != "" || ar.Kind.Kind != "Namespace"):
		// The review of a Namespace names it as its namespace too.
		d.resp = admission.Allowed("a namespaced object is a Lock's to freeze, not a ClusterLock's")
	case exempt == nil || exempt.exempt(ar.UserInfo.Username, ar.UserInfo.Groups):
		d.resp = admission.Allowed("exempt from ReadOnly ClusterLocks")
	case ar.SubResource != "":
		d = h.decideFrozen(ctx, req, "the "+ar.SubResource+" subresource", ar.OldObject.Raw)
	default:
		var oldObj, newObj map[string]any
		if err := decodeObject(ar.OldObject.Raw, &oldObj); err != nil {
			d.resp = errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify ClusterLocks: cannot read the %s being updated: %w", ar.Kind.Kind, err))
			break
		}
		if err := decodeObject(ar.Object.Raw, &newObj); err != nil {
			d.resp = errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify ClusterLocks: cannot read the updated %s: %w", ar.Kind.Kind, err))
			break
		}
		if field, changed := lockv1alpha1.FrozenChange(oldObj, newObj); changed {
			d = h.decideFrozen(ctx, req, field, ar.OldObject.Raw)
		}
	}
	if len(d.clusterLocks) > 0 {
		// The Events of the refusal name the object by UID too.
		req.OldObject.Metadata.UID = objectMeta(ar.OldObject.Raw).UID
	}
	return h.finish.finish(req, d, start)
}

// decideFrozen answers req, an UPDATE that changes field, from the live
// ReadOnly ClusterLocks naming its object (frozenBy).
func (h *ClusterLockHandler) decideFrozen(ctx context.Context, req Request, field string, old []byte) decision {
	d := decision{guard: GuardReadOnly, resp: admission.Allowed("")}
	key := req.Target()
	// Covered as the object is before the update (a selector ClusterLock
	// by its labels then: a frozen object cannot be relabelled out);
	// cluster-scoped, though the review of a Namespace names the namespace
	// itself as its namespace.
	o := key.Object(objectMeta(old).Labels)
	o.Namespace = ""
	locks, err := h.frozenBy(ctx, o, readOnlyLabel(old) == "true")
	if err != nil {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not read the ClusterLocks of %s %s, so the update is refused; retry when lockguard is ready: %w", key.Kind, key.Name, err))
		return d
	}
	return d.clusterRefusal(locks, func(locks []lockv1alpha1.ClusterLock) string {
		return ClusterUpdateDenialMessage(key.Kind, key.Name, locks, field)
	})
}

// frozenBy returns the live ReadOnly ClusterLocks (enforcing or audit)
// that cover the object o (by name, or by selector on its labels), sorted
// by name: the cache's; the API
// server's when the cache holds none that enforces and labelled says the
// object carries ReadOnlyLabel (the reconciler, or a create the cache has
// not seen, labelled it for an enforcing one: the cache may lag a create,
// or a level raised to ReadOnly, which no marker announces), or when
// there is no cache.
func (h *ClusterLockHandler) frozenBy(ctx context.Context, o lockv1alpha1.Object, labelled bool) ([]lockv1alpha1.ClusterLock, error) {
	now := h.c.Now()
	return h.clusterLocks(ctx, func(c *lockv1alpha1.ClusterLock) bool {
		return c.Spec.Level == lockv1alpha1.LevelReadOnly && c.Covers(now, o)
	},
		func(found []lockv1alpha1.ClusterLock) bool {
			return !labelled || slices.ContainsFunc(found, func(c lockv1alpha1.ClusterLock) bool { return c.Enforces() })
		})
}

// readOnlyLabel returns the value of ReadOnlyLabel on raw, an object in
// JSON; "" when it has none.
func readOnlyLabel(raw []byte) string {
	var obj map[string]any
	if decodeObject(raw, &obj) != nil {
		return ""
	}
	return labelsOf(obj)[lockv1alpha1.ReadOnlyLabel]
}

// ClusterUpdateDenialMessage is the refusal of an update of kind name
// that changes field, which locks (live ReadOnly ClusterLocks) freeze:
// their names, reasons and level, and the way out.
func ClusterUpdateDenialMessage(kind, name string, locks []lockv1alpha1.ClusterLock, field string) string {
	return fmt.Sprintf("%s %s is read-only under ClusterLock(s) %s (level %s; the update changes %s); delete the ClusterLock(s) or set their level to %s before changing it (either needs the verb %q on it: the ClusterRole %s)",
		kind, name, describeClusterLocks(locks), lockv1alpha1.LevelReadOnly, field, lockv1alpha1.LevelCanNotDelete, lockv1alpha1.UnlockVerb, lockv1alpha1.ClusterUnlockRole)
}
