// Package webhook implements lockguard's validating admission handler: it
// denies the DELETE of a core.navique.com resource while a live Lock in the
// same namespace targets it.
//
// The handler is read-only. It decides from Lock objects found through a
// LockFinder (in lockguard, a field index on the manager's informer cache),
// never from the core.navique.com/locked annotation, so editing the
// annotation never unprotects anything.
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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Path is where lockguard serves the handler on its webhook server.
const Path = "/validate-delete"

// LockFinder finds the live Locks that target a resource: Locks that exist,
// are not being deleted, and target that group, kind and name in the
// resource's namespace. The match ignores the API version: a Stack deleted
// through v1beta1 is the same Stack.
type LockFinder interface {
	// FindLocks returns the live Locks targeting the object, in any order.
	// It returns an error when it cannot tell (for example while its cache
	// has not synced); the handler then fails closed.
	FindLocks(ctx context.Context, gk schema.GroupKind, obj types.NamespacedName) ([]lockv1alpha1.Lock, error)
}

// LockFinderFunc adapts a function to a LockFinder.
type LockFinderFunc func(ctx context.Context, gk schema.GroupKind, obj types.NamespacedName) ([]lockv1alpha1.Lock, error)

// FindLocks calls f.
func (f LockFinderFunc) FindLocks(ctx context.Context, gk schema.GroupKind, obj types.NamespacedName) ([]lockv1alpha1.Lock, error) {
	return f(ctx, gk, obj)
}

// Handler denies DELETEs of Locked core.navique.com resources.
type Handler struct {
	finder  LockFinder
	metrics *Metrics
	events  events.EventRecorder
}

// Option configures a Handler.
type Option func(*Handler)

// WithMetrics makes the handler count its decisions in m.
func WithMetrics(m *Metrics) Option { return func(h *Handler) { h.metrics = m } }

// WithEventRecorder makes the handler record a DeleteBlocked Warning Event
// on the target and on each protecting Lock for every denied delete that is
// not a dry run. The recorder must be asynchronous (client-go's is).
func WithEventRecorder(r events.EventRecorder) Option { return func(h *Handler) { h.events = r } }

// NewHandler returns a Handler that finds Locks through finder.
func NewHandler(finder LockFinder, opts ...Option) *Handler {
	h := &Handler{finder: finder}
	for _, o := range opts {
		o(h)
	}
	return h
}

var _ admission.Handler = &Handler{}

// Handle decides one admission request. It allows everything that is not a
// DELETE of a core.navique.com resource other than a Lock, denies the DELETE
// of a resource targeted by live Locks, and answers Errored (so that the API
// server, with failurePolicy Fail, rejects the delete) when it cannot tell.
// It reads its cache only: the Events of a denial are handed to an
// asynchronous recorder.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	start := time.Now()
	resp, locks := h.decide(ctx, req)
	h.metrics.observe(req, resp, time.Since(start))
	if len(locks) > 0 && h.events != nil && !isDryRun(req) {
		h.recordDenial(req, locks)
	}
	return resp
}

// decide answers req, and returns the Locks that deny it if it is denied.
func (h *Handler) decide(ctx context.Context, req admission.Request) (admission.Response, []lockv1alpha1.Lock) {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("not a DELETE"), nil
	}
	if req.Kind.Group != lockv1alpha1.Group {
		return admission.Allowed("not a " + lockv1alpha1.Group + " resource"), nil
	}
	if req.Kind.Kind == "Lock" {
		return admission.Allowed("deleting a Lock is never blocked"), nil
	}
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	obj := types.NamespacedName{Namespace: req.Namespace, Name: req.Name}
	if obj.Name == "" {
		// A deletecollection request names no object: the API server asks
		// about each object it deletes, sent as oldObject.
		meta, err := objectMeta(req.OldObject.Raw)
		if err != nil {
			return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: cannot read the name of the %s being deleted: %w", gk, err)), nil
		}
		if meta.Name == "" {
			return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: the DELETE of a %s names no object", gk)), nil
		}
		obj.Name = meta.Name
	}
	if obj.Namespace == "" {
		// Locks are namespaced and protect objects in their own namespace.
		return admission.Allowed("cluster-scoped resources cannot be locked"), nil
	}

	locks, err := h.finder.FindLocks(ctx, gk, obj)
	if err != nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks for %s %s, so the delete is refused; retry when lockguard is ready: %w", gk, obj, err)), nil
	}
	if len(locks) == 0 {
		return admission.Allowed(""), nil
	}
	return admission.Denied(DenialMessage(locks)), locks
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

// metadata is the part of an object the handler reads.
type metadata struct {
	Name string    `json:"name"`
	UID  types.UID `json:"uid"`
}

// objectMeta reads metadata.name and metadata.uid from a serialized object;
// the rest is skipped, not decoded. Keys match case-sensitively, as the API
// server decodes objects: encoding/json would take "Name" or "METADATA" for
// the name too, and so could check another object than the one deleted.
func objectMeta(raw []byte) (metadata, error) {
	var obj struct {
		Metadata metadata `json:"metadata"`
	}
	if len(raw) == 0 {
		return obj.Metadata, nil
	}
	err := utiljson.Unmarshal(raw, &obj)
	return obj.Metadata, err
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
