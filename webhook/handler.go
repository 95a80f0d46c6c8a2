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
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	finder LockFinder
}

// NewHandler returns a Handler that finds Locks through finder.
func NewHandler(finder LockFinder) *Handler {
	return &Handler{finder: finder}
}

var _ admission.Handler = &Handler{}

// Handle decides one admission request. It allows everything that is not a
// DELETE of a core.navique.com resource other than a Lock, denies the DELETE
// of a resource targeted by live Locks, and answers Errored (so that the API
// server, with failurePolicy Fail, rejects the delete) when it cannot tell.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Delete {
		return admission.Allowed("not a DELETE")
	}
	if req.Kind.Group != lockv1alpha1.Group {
		return admission.Allowed("not a " + lockv1alpha1.Group + " resource")
	}
	if req.Kind.Kind == "Lock" {
		return admission.Allowed("deleting a Lock is never blocked")
	}
	gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
	obj := types.NamespacedName{Namespace: req.Namespace, Name: req.Name}
	if obj.Name == "" {
		// A deletecollection request names no object: the API server asks
		// about each object it deletes, sent as oldObject.
		name, err := objectName(req.OldObject.Raw)
		if err != nil {
			return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: cannot read the name of the %s being deleted: %w", gk, err))
		}
		if name == "" {
			return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: the DELETE of a %s names no object", gk))
		}
		obj.Name = name
	}
	if obj.Namespace == "" {
		// Locks are namespaced and protect objects in their own namespace.
		return admission.Allowed("cluster-scoped resources cannot be locked")
	}

	locks, err := h.finder.FindLocks(ctx, gk, obj)
	if err != nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks for %s %s, so the delete is refused; retry when lockguard is ready: %w", gk, obj, err))
	}
	if len(locks) == 0 {
		return admission.Allowed("")
	}
	return admission.Denied(DenialMessage(locks))
}

// DenialMessage is the message of a denied delete: the contract's sentence
// naming every Lock (sorted, Go's %v of a []string), then the Locks' reasons.
func DenialMessage(locks []lockv1alpha1.Lock) string {
	sorted := slices.Clone(locks)
	slices.SortFunc(sorted, func(a, b lockv1alpha1.Lock) int { return strings.Compare(a.Name, b.Name) })
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

// objectName reads metadata.name from a serialized object without decoding
// the rest of it.
func objectName(raw []byte) (string, error) {
	if len(raw) == 0 {
		return "", nil
	}
	var obj struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", err
	}
	return obj.Metadata.Name, nil
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
