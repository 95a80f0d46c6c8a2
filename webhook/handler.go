package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// Handler denies the DELETEs that would destroy locked core.navique.com
// resources: of the resources themselves, of their namespaces and of their
// CustomResourceDefinitions.
type Handler struct {
	locks   *lockReader
	guards  []guard // asked in turn (Decide)
	metrics *Metrics
	events  events.EventRecorder
	denials DenialRecorder // nil: lastDenied is not recorded
	gate    *transport.Gate

	eventLimits EventLimits
	cascade     *cascadeGuard  // nil: cascades are not walked
	cluster     *clusterGuards // nil: Namespace and CRD deletes are answered Errored
	// served lists the group's kinds for the cluster guards
	// (WithServedKinds).
	served func() ([]schema.GroupKind, error)
}

// Option configures a Handler (options.go).
type Option func(*Handler)

// NewHandler returns a Handler that looks Locks up in index and confirms
// the deletes index would allow by listing the namespace's Locks through
// live, a reader of the API server. With live nil, it decides from index
// alone (lockguard's --cache-only-decisions).
func NewHandler(index LockIndex, live LockLister, opts ...Option) *Handler {
	h := &Handler{locks: newLockReader(index, live)}
	for _, o := range opts {
		o(h)
	}
	if h.gate == nil {
		h.gate = transport.NewGate(transport.Limits{}, h.metrics.Refused)
	}
	if h.events != nil {
		h.events = newLimitedRecorder(h.events, h.eventLimits, h.metrics, time.Now)
	}
	h.guards = []guard{objectGuard{locks: h.locks}}
	if h.cascade != nil {
		h.cascade.locks, h.cascade.metrics = h.locks, h.metrics
		h.guards = append(h.guards, h.cascade)
	}
	if h.cluster != nil {
		h.cluster.locks, h.cluster.served = h.locks, h.served
		h.guards = append(h.guards, namespaceGuard{h.cluster}, crdGuard{h.cluster})
	}
	return h
}

// Decide decides one admission request. It denies the DELETE of a
// core.navique.com resource targeted by live Locks (the object guard,
// object.go), or whose cascade would delete one (the cascade guard,
// cascade.go), of a Namespace holding a live Lock on an existing object
// (the namespace guard, namespace.go) and of the CustomResourceDefinition
// of a kind with a locked existing object, or of Locks while any live Lock
// exists (the CRD guard, crd.go); it allows everything else, and answers
// Errored (so that the API server, with failurePolicy Fail, rejects the
// delete) when it cannot tell. It writes nothing: the Events of a denial
// and its lastDenied (recordRefusal) are handed to asynchronous recorders.
func (h *Handler) Decide(ctx context.Context, req Request) admission.Response {
	start := time.Now()
	d := h.decide(ctx, req)
	h.metrics.observe(req, d.guard, d.resp, time.Since(start))
	d.resp.AuditAnnotations = auditAnnotations(d.guard, d.resp, d.locks, d.more)
	if !d.resp.Allowed {
		h.recordRefusal(d.locks, refusalOf(req))
	}
	if len(d.locks) > 0 && h.events != nil && !req.DryRun {
		recordDenial(h.events, req, d)
	}
	return d.resp
}

// decide asks the guards about req in turn (guard): the first that
// refuses it decides, a later answer replaces one that allows it. A DELETE
// that no guard answers was sent to a handler not configured for it.
func (h *Handler) decide(ctx context.Context, req Request) decision {
	kind := guardOf(req)
	d := decision{guard: kind}
	if req.Operation != admissionv1.Delete {
		d.resp = admission.Allowed("not a DELETE")
		return d
	}
	d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks: it is not configured to guard the DELETE of a %s", req.Kind.Kind))
	for _, g := range h.guards {
		next, ok := g.decide(ctx, req, kind)
		if !ok {
			continue
		}
		if d = next; !d.resp.Allowed {
			break
		}
	}
	return d
}

// recordRefusal is the one hook every guard's refusal goes through on
// its way to the refusing Locks' status.lastDenied: Decide calls it for
// the delete guards (object, cascade, namespace, CRD), and any other
// guard's decision calls it with the Locks that refused its request. It
// hands the refusal to the DenialRecorder, which only updates memory (the
// write is asynchronous), unless the request is a dry run (the webhook
// declares sideEffects NoneOnDryRun) or no Lock refused it.
func (h *Handler) recordRefusal(locks []lockv1alpha1.Lock, r refusal) {
	if len(locks) == 0 || r.dryRun || h.denials == nil {
		return
	}
	h.denials.RecordDenial(locks, lockv1alpha1.DeniedRequest{
		Time:      metav1.NewTime(time.Now()),
		User:      r.user,
		Operation: string(r.operation),
		Kind:      r.kind,
		Name:      r.name,
	})
}
