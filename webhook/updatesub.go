package webhook

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The update guard's subresources (docs/contract.md rule 16, issue 36): an
// UPDATE through any subresource but status (scale, any other) writes
// the object as much as an UPDATE of the object does, so under a ReadOnly
// Lock it is refused. The chart's subresource entry sends them (its
// namespaceSelector: only in namespaces holding Locks). Their reviews do
// not carry the object: a scale review carries autoscaling/v1 Scale
// objects, named as the object but without its labels, so the guard reads
// the object's kind and labels (Parents) to find the Locks that cover it,
// selector Locks too.

// StatusSubresource is the one subresource ReadOnly never freezes.
const StatusSubresource = "status"

// ScaleSubresource is the subresource whose objects the update guard
// compares (autoscaling/v1 Scale): a scale to the same replicas changes
// nothing. Any other subresource's UPDATE counts as a change.
const ScaleSubresource = "scale"

// Parents reads what the update guard needs of the object that an UPDATE
// of one of its subresources writes, which the review does not carry (in
// lockguard, cmd/lockguard/manager reads it from the API server).
type Parents interface {
	// Parent returns the kind and the labels of the object name in
	// namespace ns, served as resource gvr (the review's resource). It
	// returns an error when it cannot tell; the update is then refused.
	Parent(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (kind string, labels map[string]string, err error)
}

// ParentsFunc adapts a function to Parents.
type ParentsFunc func(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (string, map[string]string, error)

// Parent calls f.
func (f ParentsFunc) Parent(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (string, map[string]string, error) {
	return f(ctx, gvr, ns, name)
}

// decideSubresource answers req, an UPDATE through a subresource (not
// status), naming the kind of the object it writes once it is read
// (decision.kind): allowed when the object is not a namespaced one of a
// kind Locks protect, when an exempt principal sends it, when a scale
// changes nothing (FrozenChange of the two Scale objects) or no live
// ReadOnly Lock covers the object (its labels as Parents reads them);
// denied otherwise, naming the Locks and "the
// <subresource> subresource". Like an update of the object, it answers
// Errored, so that the API server refuses the update, when it cannot
// read the objects, the object's kind and labels, or the Locks.
func (g readOnlyGuard) decideSubresource(ctx context.Context, req Request) decision {
	d := decision{guard: GuardReadOnly}
	sub := req.Update.SubResource
	gvr := schema.GroupVersionResource{Group: req.Update.Resource.Group, Version: req.Update.Resource.Version, Resource: req.Update.Resource.Resource}
	switch {
	case gvr.Group != lockv1alpha1.Group:
		d.resp = admission.Allowed(lockv1alpha1.ErrNotProtectable.Error())
		return d
	case req.Namespace == "":
		d.resp = admission.Allowed("cluster-scoped resources cannot be locked")
		return d
	case g.exempt.exempt(req.UserInfo.Username, req.Update.Groups):
		d.resp = admission.Allowed("exempt from ReadOnly Locks")
		return d
	}
	field := "the " + sub + " subresource"
	if sub == ScaleSubresource {
		_, _, changed, err := frozenChange(req, field)
		switch {
		case err != nil:
			d.resp = errored(http.StatusBadRequest, err)
			return d
		case !changed:
			d.resp = admission.Allowed("")
			return d
		}
	}
	if g.parents == nil {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks for %s %s/%s, so the update of its %s subresource is refused: it cannot read the object",
			gvr.GroupResource(), req.Namespace, req.Name, sub))
		return d
	}
	kind, labels, err := g.parents.Parent(ctx, gvr, req.Namespace, req.Name)
	if err != nil {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks for %s %s/%s, so the update of its %s subresource is refused; retry when lockguard is ready: %w",
			gvr.GroupResource(), req.Namespace, req.Name, sub, err))
		return d
	}
	d.kind = metav1.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: kind}
	gk := schema.GroupKind{Group: gvr.Group, Kind: kind}
	if err := lockv1alpha1.Protectable(gk); err != nil {
		d.resp = admission.Allowed(err.Error())
		return d
	}
	return g.readOnlyLocks(ctx, d, req, gk, labels, field)
}
