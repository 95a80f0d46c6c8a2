package webhook

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/eventnote"
	"github.com/navique/lockguard/internal/transport"
)

// Handler denies the DELETEs that would destroy locked core.navique.com
// resources: of the resources themselves, of their namespaces and of their
// CustomResourceDefinitions. The update guard's (NewUpdateHandler) is a
// Handler too, of one guard, that answers UPDATEs.
type Handler struct {
	locks      *lockReader
	exceptions *exceptions // nil: no exception lets anything through
	// op is the operation the guards answer (DELETE; UPDATE for the
	// update guard's): Decide allows every other.
	op     admissionv1.Operation
	guards []guard // asked in turn (Decide)
	gate   *transport.Gate
	finish *finisher
}

// NewHandler returns the Handler of c.
func NewHandler(c Config) *Handler {
	api := LockLister(nil)
	if c.Cluster != nil {
		api = c.Cluster.API
	}
	h := &Handler{locks: newLockReader(c.Locks, c.Live, api, c.Freshness, c.Now), op: admissionv1.Delete, gate: c.Gate}
	if h.gate == nil {
		h.gate = transport.NewGate(transport.Limits{}, c.Metrics.Refused)
	}
	h.finish = &finisher{metrics: c.Metrics, denials: c.Denials, wouldDeny: c.WouldDeny}
	if h.exceptions = newExceptions(c.Exceptions, h.locks, c.Metrics); h.exceptions != nil {
		h.finish.uses = c.Exceptions.Uses
	}
	if c.Events != nil {
		h.finish.events = newLimitedRecorder(eventnote.Recorder(c.Events), c.EventLimits, c.Metrics, time.Now)
	}
	h.guards = []guard{objectGuard{locks: h.locks, exceptions: h.exceptions}}
	if g := newCascadeGuard(c.Cascade, h.locks, c.Metrics); g != nil {
		h.guards = append(h.guards, g)
	}
	if c.Cluster != nil {
		g := &clusterGuards{locks: h.locks, api: c.Cluster.API, kinds: c.Cluster.Kinds, served: c.Cluster.Served, slots: newSlots(maxClusterDecisions, "namespace or CRD deletes")}
		h.guards = append(h.guards, namespaceGuard{g}, crdGuard{g})
	}
	return h
}

// UpdateHandler serves the update guard's Handler (UpdatePath): a
// Handler of the delete guards' Locks, bounds and finishing step (the same
// metrics, audit annotations, lastDenied and Events), whose one guard is
// the update guard.
type UpdateHandler struct{ h *Handler }

// NewUpdateHandler returns the update guard of h's Locks, ending its
// decisions as h does, exempting exempt, reading through parents the
// objects that subresource updates write (nil: such updates are refused).
func NewUpdateHandler(h *Handler, exempt Exemptions, parents Parents) *UpdateHandler {
	g := readOnlyGuard{locks: h.locks, exceptions: h.exceptions, exempt: exempt, parents: parents}
	return &UpdateHandler{&Handler{locks: h.locks, exceptions: h.exceptions, op: admissionv1.Update, guards: []guard{g}, gate: h.gate, finish: h.finish}}
}

// Decide decides one admission request. It denies the DELETE of a
// core.navique.com resource targeted by live Locks (the object guard,
// object.go), or whose cascade would delete one (the cascade guard,
// cascade.go), of a Namespace holding a live Lock on an existing object
// (the namespace guard, namespace.go) and of the CustomResourceDefinition
// of a kind with a locked existing object, or of Locks while any live Lock
// exists (the CRD guard, crd.go), or, in the update guard's Handler, the
// UPDATE that a live ReadOnly Lock freezes (update.go); it allows
// everything else, and answers Errored (so that the API server, with
// failurePolicy Fail, rejects the request) when it cannot tell. It writes
// nothing: the Events of a denial and its lastDenied (finisher.finish)
// are handed to asynchronous recorders.
//
// The guards are asked in turn, each with the guard of req (guardOf):
// the first that refuses req decides, a later answer replaces one that
// allows it. A request that no guard answers was sent to a handler not
// configured for it.
func (h *Handler) Decide(ctx context.Context, req Request) admission.Response {
	start := time.Now()
	kind := GuardReadOnly
	if h.op == admissionv1.Delete {
		kind = cmp.Or(guardOf[schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}], GuardObject)
	}
	d := decision{guard: kind}
	if req.Operation != h.op {
		d.resp = admission.Allowed(notGuarded[h.op])
		return h.finish.finish(req, d, start)
	}
	answered := false
	for _, g := range h.guards {
		next, ok := g.decide(ctx, req, kind)
		if !ok {
			continue
		}
		answered = true
		if next.resp.Allowed && len(d.audit) > 0 {
			if len(next.audit) > 0 {
				// Both would refuse: the first stands, as a refusal
				// would (the object guard's, before the cascade's).
				continue
			}
			// What audit Locks would refuse stays said (the object
			// guard's, when the cascade guard allows too).
			next.audit, next.wouldDeny = d.audit, d.wouldDeny
		}
		if next.resp.Allowed && next.pierced == nil && d.pierced != nil {
			// The exception's use stays recorded (the object guard's,
			// when the cascade guard allows too), with its warning.
			next.pierced = d.pierced
			next.resp.Warnings = append(slices.Clone(d.resp.Warnings), next.resp.Warnings...)
		}
		if d = next; !d.resp.Allowed {
			break
		}
	}
	if !answered {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks: it is not configured to guard the %s of a %s", h.op, req.Kind.Kind))
	}
	return h.finish.finish(req, d, start)
}

// finisher is the one step every decision of every path ends in (finish).
type finisher struct {
	metrics   *Metrics
	events    events.EventRecorder // nil: no Events
	denials   DenialRecorder       // nil: lastDenied is not recorded
	wouldDeny DenialRecorder       // nil: lastWouldDeny is not recorded
	uses      DenialRecorder       // nil: lastException is not recorded
}

// finish ends d, the decision of req that began at start: it counts it,
// puts its audit annotations on the response and, unless req is a dry run
// (the webhook declares sideEffects NoneOnDryRun) or no Lock or
// ClusterLock refused it, hands the refusal to the DenialRecorder, for
// the refusing Locks' (or ClusterLocks') status.lastDenied, and records
// its Warning Events (recordRefused). Both recorders only update memory:
// their writes are asynchronous.
//
// A request that only audit Locks (or ClusterLocks) would refuse
// (decision.refusal, decision.clusterRefusal) is allowed, ends with the
// would-deny ending: a warning that says the refusal (WouldDenyWarning),
// lockguard_would_deny_total and, unless a dry run, the audit Locks'
// status.lastWouldDeny (docs/contract.md rule 20).
func (f *finisher) finish(req Request, d decision, start time.Time) admission.Response {
	if d.kind.Kind != "" {
		req.Kind = d.kind
	}
	f.metrics.observe(req, d.guard, d.resp, time.Since(start))
	d.resp.AuditAnnotations = auditAnnotations(d.guard, d.resp, d.locks, d.more)
	if d.resp.Allowed && (len(d.audit) > 0 || len(d.clusterAudit) > 0) {
		d.resp = d.resp.WithWarnings(WouldDenyWarning(d.wouldDeny))
		f.metrics.wouldDeny(req, d.guard)
		if !req.DryRun && f.wouldDeny != nil {
			recordDenial(f.wouldDeny, d.audit, d.clusterAudit, deniedRequest(req))
		}
	}
	if d.pierced != nil {
		// auditAnnotations' maps may be shared: exceptionUsed writes.
		d.resp.AuditAnnotations = maps.Clone(d.resp.AuditAnnotations)
		f.exceptionUsed(req, d)
	}
	if (len(d.locks) == 0 && len(d.clusterLocks) == 0) || req.DryRun {
		return d.resp
	}
	name := req.Target().Name
	if !d.resp.Allowed && f.denials != nil {
		recordDenial(f.denials, d.locks, d.clusterLocks, deniedRequest(req))
	}
	if f.events != nil {
		recordRefused(f.events, req, name, d)
	}
	return d.resp
}

// WouldDenyWarning is the admission warning of a request that audit Locks
// would have refused with message, and that was allowed.
func WouldDenyWarning(message string) string { return "lockguard: would deny: " + message }

// deniedRequest is req as status.lastDenied and lastWouldDeny record it.
func deniedRequest(req Request) lockv1alpha1.DeniedRequest {
	return lockv1alpha1.DeniedRequest{
		Time:      metav1.NewTime(time.Now()),
		User:      req.UserInfo.Username,
		Operation: string(req.Operation),
		Kind:      req.Kind.Kind,
		Name:      req.Target().Name,
	}
}
