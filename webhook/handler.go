package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/eventnote"
	"github.com/navique/lockguard/internal/transport"
)

// Path is where lockguard serves the handler on its webhook server.
const Path = "/validate-delete"

// Handler denies the DELETEs that would destroy locked core.navique.com
// resources: of the resources themselves, of their namespaces and of their
// CustomResourceDefinitions.
type Handler struct {
	locks   *lockFinder
	metrics *Metrics
	events  events.EventRecorder
	gate    *transport.Gate

	eventLimits EventLimits
	cluster     *clusterGuards // nil: Namespace and CRD deletes are answered Errored
	cascade     *cascadeGuard  // nil: cascades are not walked
}

// Option configures a Handler.
type Option func(*Handler)

// WithGate makes the handler read reviews within g, the webhook server's
// bounds shared by every path; default: a Gate of its own with the default
// Limits, counting refusals in the handler's Metrics.
func WithGate(g *transport.Gate) Option { return func(h *Handler) { h.gate = g } }

// WithMetrics makes the handler count its decisions in m.
func WithMetrics(m *Metrics) Option { return func(h *Handler) { h.metrics = m } }

// WithEventRecorder makes the handler record a DeleteBlocked Warning Event
// on the target and on each protecting Lock for every denied delete that is
// not a dry run, within EventLimits, its notes truncated to what the API
// server accepts (eventnote.Recorder). The recorder must be asynchronous
// (client-go's is).
func WithEventRecorder(r events.EventRecorder) Option {
	return func(h *Handler) { h.events = eventnote.Recorder(r) }
}

// NewHandler returns a Handler that looks Locks up in index and confirms
// the deletes index would allow by listing the namespace's Locks through
// live, a reader of the API server. With live nil, it decides from index
// alone (lockguard's --cache-only-decisions).
func NewHandler(index LockIndex, live LockLister, opts ...Option) *Handler {
	h := &Handler{locks: newLockFinder(index, live)}
	for _, o := range opts {
		o(h)
	}
	if h.gate == nil {
		h.gate = transport.NewGate(transport.Limits{}, h.metrics.Refused)
	}
	if h.events != nil {
		h.events = newLimitedRecorder(h.events, h.eventLimits, h.metrics, time.Now)
	}
	return h
}

var _ admission.Handler = &Handler{}

// decideCluster decides a Namespace or CRD delete (guard) within the
// guards' bound of decisions at once. It returns the Locks that deny it,
// and how many more do that it does not return.
func (h *Handler) decideCluster(ctx context.Context, guard string, req Request) (admission.Response, []lockv1alpha1.Lock, int) {
	ctx, cancel := guardContext(ctx)
	defer cancel()
	if err := h.cluster.enter(ctx); err != nil {
		return errored(http.StatusServiceUnavailable, err), nil, 0
	}
	defer h.cluster.leave()
	if guard == GuardNamespace {
		return h.cluster.decideNamespace(ctx, req)
	}
	return h.cluster.decideCRD(ctx, req)
}

// Handle decides a request decoded by controller-runtime: Decide, for
// controller-runtime's admission.Webhook. lockguard serves the Handler
// itself (ServeHTTP), which decodes less.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	r, err := requestOf(req)
	if err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: %w", err))
	}
	return h.Decide(ctx, r)
}

// Decide decides one admission request. It denies the DELETE of a
// core.navique.com resource targeted by live Locks (the object guard), or
// whose cascade would delete one (the cascade guard, cascade.go), of a
// Namespace holding a live Lock on an existing object (the namespace guard,
// namespace.go) and of the CustomResourceDefinition of a kind with a locked
// existing object, or of Locks while any live Lock exists (the CRD guard,
// crd.go); it allows everything else, and answers Errored (so that the API
// server, with failurePolicy Fail, rejects the delete) when it cannot
// tell. It writes nothing: the Events of a denial are handed to an
// asynchronous recorder.
func (h *Handler) Decide(ctx context.Context, req Request) admission.Response {
	start := time.Now()
	guard := guardOf(req)
	var resp admission.Response
	var locks []lockv1alpha1.Lock
	more := 0 // denying Locks not in locks
	switch {
	case guard == GuardObject || req.Operation != admissionv1.Delete:
		resp, locks = h.decide(ctx, req)
		if r, l, decided := h.cascadeOf(ctx, req, resp); decided {
			resp, locks, guard = r, l, GuardCascade
		}
	case h.cluster == nil:
		resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks: it is not configured to guard the DELETE of a %s", req.Kind.Kind))
	default:
		resp, locks, more = h.decideCluster(ctx, guard, req)
	}
	h.metrics.observe(req, guard, resp, time.Since(start))
	resp.AuditAnnotations = auditAnnotations(guard, resp, locks, more)
	if len(locks) > 0 && h.events != nil && !req.DryRun {
		if guard == GuardObject {
			h.recordDenial(req, locks)
		} else {
			h.recordClusterDenial(req, locks)
		}
	}
	return resp
}

// guardOf returns the guard that decides req: the namespace guard for a
// Namespace, the CRD guard for a CustomResourceDefinition, the object
// guard for anything else.
func guardOf(req Request) string {
	switch {
	case isNamespace(req):
		return GuardNamespace
	case isCRD(req):
		return GuardCRD
	}
	return GuardObject
}

// decide answers req, and returns the Locks that deny it if it is denied.
func (h *Handler) decide(ctx context.Context, req Request) (admission.Response, []lockv1alpha1.Lock) {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("not a DELETE"), nil
	}
	target := lockv1alpha1.TargetKey{Namespace: req.Namespace, Group: req.Kind.Group, Kind: req.Kind.Kind, Name: targetName(req)}
	if err := lockv1alpha1.Protectable(target.GroupKind()); err != nil {
		return admission.Allowed(err.Error()), nil
	}
	if target.Name == "" {
		// A deletecollection request names no object: the API server asks
		// about each object it deletes, sent as oldObject.
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: the DELETE of a %s names no object", target.GroupKind())), nil
	}
	if target.Namespace == "" {
		// Locks are namespaced and protect objects in their own namespace.
		return admission.Allowed("cluster-scoped resources cannot be locked"), nil
	}

	locks, err := h.locks.find(ctx, target)
	if err != nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks for %s %s/%s, so the delete is refused; retry when lockguard is ready: %w",
			target.GroupKind(), target.Namespace, target.Name, err)), nil
	}
	if len(locks) == 0 {
		return admission.Allowed(""), nil
	}
	return admission.Denied(DenialMessage(locks)), locks
}

// targetName is the name of the object req deletes: the request's, or for
// a deletecollection (which names none) oldObject's.
func targetName(req Request) string {
	if req.Name == "" {
		return req.OldObject.Metadata.Name
	}
	return req.Name
}

// DenialMessage is the message of a denied delete: the contract's sentence
// naming every Lock (sorted, Go's %v of a []string), then the Locks' reasons.
func DenialMessage(locks []lockv1alpha1.Lock) string {
	sorted := sortedByName(locks)
	names := make([]string, 0, len(sorted))
	var reasons []string
	for _, l := range sorted {
		names = append(names, l.Name)
		if l.Spec.Reason != "" {
			reasons = append(reasons, l.Name+": "+l.Spec.Reason)
		}
	}
	msg := fmt.Sprintf("resource is protected by Lock(s) %v; delete the Lock(s) before deleting this resource", names)
	if len(reasons) > 0 {
		msg += " (" + strings.Join(reasons, "; ") + ")"
	}
	return msg
}

// sortedByName returns a copy of locks sorted by name.
func sortedByName(locks []lockv1alpha1.Lock) []lockv1alpha1.Lock {
	sorted := slices.Clone(locks)
	slices.SortFunc(sorted, func(a, b lockv1alpha1.Lock) int { return strings.Compare(a.Name, b.Name) })
	return sorted
}

// errored is admission.Errored with a Status reason that matches its code,
// so clients see ServiceUnavailable or BadRequest rather than an unknown error.
func errored(code int32, err error) admission.Response {
	resp := admission.Errored(code, err)
	switch code {
	case http.StatusServiceUnavailable:
		resp.Result.Reason = metav1.StatusReasonServiceUnavailable
	case http.StatusBadRequest:
		resp.Result.Reason = metav1.StatusReasonBadRequest
	}
	return resp
}
