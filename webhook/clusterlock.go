package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// The ClusterLock guard (docs/contract.md rule 22, docs/clusterlock.md): the
// chart sends it the DELETE of the cluster-scoped kinds a ClusterLock can
// protect, and the UPDATEs that remove or change ClusterLockedLabel, of
// the objects that carry that label only (objectSelector), so that an
// outage refuses only those, never every delete of a kind. Its decisions
// end as the Lock guards' do (finisher.finish): a refusal that is not a
// dry run goes to the refusing ClusterLocks' status.lastDenied and to
// DeleteBlocked (or UpdateBlocked) Events, what only audit ClusterLocks
// would refuse to their status.lastWouldDeny, both asynchronously.

// ClusterLockPath is where lockguard answers the DELETE of a cluster-scoped
// object that carries lockv1alpha1.ClusterLockedLabel.
const ClusterLockPath = "/validate-cluster-delete"

// ClusterLabelPath is where lockguard answers the UPDATE of an object that
// removes or changes its lockv1alpha1.ClusterLockedLabel.
const ClusterLabelPath = "/validate-cluster-label"

// ClusterLockConfig is what NewClusterLockHandler reads ClusterLocks from.
type ClusterLockConfig struct {
	// Cache reads ClusterLocks from lockguard's informer (the manager's
	// cache); nil: API alone.
	Cache LockLister
	// API reads ClusterLocks from the API server: a delete or label change
	// that the cache's ClusterLocks would allow is confirmed there, since
	// the cache may not have seen a ClusterLock created a moment ago.
	API LockLister
	// Now is the clock ClusterLocks expire by; nil: time.Now.
	Now func() time.Time
	// Self returns lockguard's own username ("" while unknown): its own
	// label writes are allowed (the chart's entry skips them already).
	Self func() string
	// Labeler labels a ClusterLock's target before its create is allowed
	// (ClusterCreatePath); nil: creates are allowed as they come.
	Labeler ClusterLabeler
	// Exempt are the principals ReadOnly ClusterLocks never refuse an
	// update (ClusterUpdatePath, clusterupdate.go; Self, when unset,
	// lockguard's own); nil: no update guard, every update is allowed.
	Exempt *Exemptions
}

// ClusterLockHandler serves ClusterLockPath, ClusterLabelPath,
// ClusterCreatePath (clustercreate.go) and ClusterUpdatePath
// (clusterupdate.go).
type ClusterLockHandler struct {
	c      ClusterLockConfig
	gate   *transport.Gate
	finish *finisher
}

// NewClusterLockHandler returns the ClusterLock guard, counting and ending
// its decisions as h does (h's finisher: its metrics, audit annotations,
// Events and lastDenied and lastWouldDeny recorders), reading within h's
// Gate.
func NewClusterLockHandler(h *Handler, c ClusterLockConfig) *ClusterLockHandler {
	if c.Now == nil {
		c.Now = time.Now
	}
	return &ClusterLockHandler{c: c, gate: h.gate, finish: h.finish}
}

// DeleteHandler returns the http.Handler of ClusterLockPath.
func (h *ClusterLockHandler) DeleteHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transport.ServeReview(h.gate, w, r, func(body []byte) (Request, types.UID, error) {
			req, err := decodeReview(body)
			return req, req.UID, err
		}, h.DecideDelete)
	})
}

// LabelHandler returns the http.Handler of ClusterLabelPath.
func (h *ClusterLockHandler) LabelHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transport.ServeReview(h.gate, w, r, transport.DecodeReview, h.DecideLabel)
	})
}

// DecideDelete denies the DELETE of an object that a live ClusterLock
// names or selects (its labels match the selector), naming the ClusterLocks, their reasons and how to unlock; a
// ClusterLock in Audit enforcement only warns. What the cache's
// ClusterLocks would allow is confirmed with the API server's; when
// neither can be read, the delete is refused (fail closed).
func (h *ClusterLockHandler) DecideDelete(ctx context.Context, req Request) admission.Response {
	start := time.Now()
	d := decision{guard: GuardClusterLock}
	switch {
	case req.Operation != admissionv1.Delete:
		d.resp = admission.Allowed(notGuarded[admissionv1.Delete])
	case req.OldObject.Metadata.DeletionTimestamp != nil:
		d.resp = admission.Allowed("the object is already being deleted")
	default:
		d = h.decide(ctx, req, ClusterLockDenialMessage)
	}
	return h.finish.finish(req, d, start)
}

// decide answers req from the live ClusterLocks covering its object (by
// name, or by selector on req.OldObject's labels): refused with message
// when one enforces, allowed with a warning when only audit ones do
// (clusterRefusal).
func (h *ClusterLockHandler) decide(ctx context.Context, req Request, message func(kind, name string, locks []lockv1alpha1.ClusterLock) string) decision {
	d := decision{guard: GuardClusterLock}
	key := req.Target()
	// Cluster-scoped, though the review of a Namespace names the namespace
	// itself as its namespace.
	o := key.Object(req.OldObject.Metadata.Labels)
	o.Namespace = ""
	locks, err := h.covering(ctx, o)
	if err != nil {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not read the ClusterLocks of %s %s, so the request is refused; retry when lockguard is ready: %w", key.Kind, key.Name, err))
		return d
	}
	return d.clusterRefusal(locks, func(locks []lockv1alpha1.ClusterLock) string { return message(key.Kind, key.Name, locks) })
}

// clusterRefusal is decision.refusal of the ClusterLock guards: d answered
// by locks, the live ClusterLocks that would refuse its request, message
// the refusal naming some of them: denied by those that enforce, naming
// only them; when none does, allowed, with what the audit ClusterLocks
// would refuse (finisher.finish warns with it, counts it and records it
// in their lastWouldDeny); allowed when locks is empty.
func (d decision) clusterRefusal(locks []lockv1alpha1.ClusterLock, message func([]lockv1alpha1.ClusterLock) string) decision {
	enforcing := slices.DeleteFunc(slices.Clone(locks), func(c lockv1alpha1.ClusterLock) bool { return !c.Enforces() })
	switch {
	case len(enforcing) > 0:
		d.resp, d.clusterLocks = admission.Denied(message(enforcing)), enforcing
	case len(locks) > 0:
		d.resp, d.clusterAudit, d.wouldDeny = admission.Allowed(""), locks, message(locks)
	default:
		d.resp = admission.Allowed("")
	}
	return d
}

// DecideLabel refuses an UPDATE that removes or changes
// lockv1alpha1.ClusterLockedLabel on an object a live, enforcing
// ClusterLock names or selects (with the labels the update leaves),
// unless lockguard sends it; every other update is allowed.
func (h *ClusterLockHandler) DecideLabel(ctx context.Context, ar admission.Request) admission.Response {
	start := time.Now()
	next := objectMeta(ar.Object.Raw)
	// A selector ClusterLock covers the object as the update leaves it: one
	// that relabels it out of the selector may take the label off too.
	req := Request{Kind: ar.Kind, Name: ar.Name, Namespace: ar.Namespace, Operation: ar.Operation,
		UserInfo: UserInfo{Username: ar.UserInfo.Username}, DryRun: ar.DryRun != nil && *ar.DryRun,
		OldObject: Object{Metadata: next}}
	d := decision{guard: GuardClusterLock, resp: admission.Allowed("")}
	switch {
	case ar.Operation != admissionv1.Update:
		d.resp = admission.Allowed(notGuarded[admissionv1.Update])
	case h.c.Self != nil && h.c.Self() != "" && ar.UserInfo.Username == h.c.Self():
	case objectMeta(ar.OldObject.Raw).Labels[lockv1alpha1.ClusterLockedLabel] != "true" || next.Labels[lockv1alpha1.ClusterLockedLabel] == "true":
	default:
		d = h.decide(ctx, req, ClusterLabelDenialMessage)
	}
	return h.finish.finish(req, d, start)
}

// objectMeta returns the labels and UID of raw, an object in JSON (the
// labels nil when it has none): what the ClusterLock guards read of it,
// the UID for the Events of a refusal.
func objectMeta(raw []byte) ObjectMeta {
	var o struct {
		Metadata struct {
			UID    types.UID         `json:"uid"`
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &o)
	return ObjectMeta{UID: o.Metadata.UID, Labels: o.Metadata.Labels}
}

// covering returns the live ClusterLocks that cover the object o (by
// name, or by selector on its labels), sorted by name: the cache's; the
// API server's when the cache holds none, or when there is no cache.
func (h *ClusterLockHandler) covering(ctx context.Context, o lockv1alpha1.Object) ([]lockv1alpha1.ClusterLock, error) {
	now := h.c.Now()
	return h.clusterLocks(ctx, func(c *lockv1alpha1.ClusterLock) bool { return c.Covers(now, o) },
		func(found []lockv1alpha1.ClusterLock) bool { return len(found) > 0 })
}

// clusterLocks returns the ClusterLocks match keeps, sorted by name: the
// cache's when enough says they are enough to answer from, the API
// server's otherwise (a cache may lag a create), or the cache's when
// lockguard reads no API server, the API server's when it has no cache.
// The one read of ClusterLocks of the delete, label and update guards.
func (h *ClusterLockHandler) clusterLocks(ctx context.Context, match func(*lockv1alpha1.ClusterLock) bool, enough func([]lockv1alpha1.ClusterLock) bool) ([]lockv1alpha1.ClusterLock, error) {
	filter := func(list *lockv1alpha1.ClusterLockList) []lockv1alpha1.ClusterLock {
		var out []lockv1alpha1.ClusterLock
		for i := range list.Items {
			if match(&list.Items[i]) {
				out = append(out, list.Items[i])
			}
		}
		slices.SortFunc(out, func(a, b lockv1alpha1.ClusterLock) int { return strings.Compare(a.Name, b.Name) })
		return out
	}
	if h.c.Cache != nil {
		list := &lockv1alpha1.ClusterLockList{}
		if err := h.c.Cache.List(ctx, list); err == nil {
			if found := filter(list); h.c.API == nil || enough(found) {
				return found, nil
			}
		} else if h.c.API == nil {
			return nil, err
		}
	}
	if h.c.API == nil {
		return nil, fmt.Errorf("lockguard reads no ClusterLocks")
	}
	ctx, cancel := guardContext(ctx)
	defer cancel()
	list := &lockv1alpha1.ClusterLockList{}
	if err := h.c.API.List(ctx, list); err != nil {
		return nil, fmt.Errorf("listing ClusterLocks from the API server: %w", err)
	}
	return filter(list), nil
}

// ClusterLockDenialMessage is the refusal of deleting kind name, which
// locks (live ClusterLocks) protect: their names and reasons, and how to
// unlock.
func ClusterLockDenialMessage(kind, name string, locks []lockv1alpha1.ClusterLock) string {
	return fmt.Sprintf("%s %s is protected by ClusterLock(s) %s; delete the ClusterLock(s) before deleting it (deleting a ClusterLock needs the verb %q on it: the ClusterRole %s)",
		kind, name, describeClusterLocks(locks), lockv1alpha1.UnlockVerb, lockv1alpha1.ClusterUnlockRole)
}

// ClusterLabelDenialMessage is the refusal of removing or changing
// ClusterLockedLabel on kind name, which locks protect.
func ClusterLabelDenialMessage(kind, name string, locks []lockv1alpha1.ClusterLock) string {
	return fmt.Sprintf("the label %s=true on %s %s is kept by lockguard while ClusterLock(s) %s protect it; delete the ClusterLock(s) to lift it (that needs the verb %q on it: the ClusterRole %s)",
		lockv1alpha1.ClusterLockedLabel, kind, name, describeClusterLocks(locks), lockv1alpha1.UnlockVerb, lockv1alpha1.ClusterUnlockRole)
}

// describeClusterLocks is "[a (reason: ...), b]".
func describeClusterLocks(locks []lockv1alpha1.ClusterLock) string {
	parts := make([]string, 0, len(locks))
	for _, c := range locks {
		p := c.Name
		if c.Spec.Reason != "" {
			p += fmt.Sprintf(" (reason: %q)", c.Spec.Reason)
		}
		parts = append(parts, p)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
