package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// objectGuard denies the DELETE of a core.navique.com object that live
// Locks in its namespace cover: target, or select by the labels of the
// request's oldObject (docs/contract.md rules 1 to 3, 10, 15).
type objectGuard struct {
	locks      *lockReader
	exceptions *exceptions // nil: no exception lets a delete through
}

// decide answers the DELETE of anything but a Namespace or a
// CustomResourceDefinition.
func (g objectGuard) decide(ctx context.Context, req Request, kind string) (decision, bool) {
	if kind != GuardObject {
		return decision{}, false
	}
	d := decision{guard: GuardObject}
	target := req.Target()
	if err := lockv1alpha1.Protectable(target.GroupKind()); err != nil {
		d.resp = admission.Allowed(err.Error())
		return d, true
	}
	switch {
	case target.Name == "":
		// A deletecollection request names no object: the API server asks
		// about each object it deletes, sent as oldObject.
		d.resp = errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: the DELETE of a %s names no object", target.GroupKind()))
		return d, true
	case target.Namespace == "":
		// Locks are namespaced and protect objects in their own namespace.
		d.resp = admission.Allowed("cluster-scoped resources cannot be locked")
		return d, true
	}
	var locks []lockv1alpha1.Lock
	var err error
	object := target.Object(req.OldObject.Metadata.Labels)
	if req.OldObject.Metadata.Name == "" {
		// No oldObject: its labels are unknown, and a selector Lock could
		// cover it. Refused (fail closed) when a live selector Lock of its
		// namespace could cover its kind, or cannot be checked, so that a
		// Lock never silently stops protecting; otherwise the targetRef
		// Locks decide.
		locks, err = g.locks.selectorsMayCover(ctx, target.Namespace, target.GroupKind())
		if err == nil && len(locks) > 0 {
			d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not read the labels of %s %s/%s (the request carries no oldObject), and selector Lock(s) %v may protect it, so the delete is refused",
				target.GroupKind(), target.Namespace, target.Name, lockNames(locks, false, 0)))
			return d, true
		}
	}
	if err == nil {
		locks, err = g.locks.find(ctx, object)
	}
	switch {
	case err != nil:
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify Locks for %s %s/%s, so the delete is refused; retry when lockguard is ready: %w",
			target.GroupKind(), target.Namespace, target.Name, err))
	default:
		// An exception may let the user through (docs/contract.md rule 20).
		d = g.exceptions.pierce(ctx, d.refusal(locks, DenialMessage), req, object, lockv1alpha1.ExceptionDelete, nil)
	}
	return d, true
}

// DenialMessage is the message of a denied delete: the contract's sentence
// naming every Lock (sorted, Go's %v of a []string), then the Locks' reasons.
func DenialMessage(locks []lockv1alpha1.Lock) string {
	names, reasons := namesAndReasons(locks)
	return withReasons(fmt.Sprintf("resource is protected by Lock(s) %v; delete the Lock(s) before deleting this resource", names), reasons)
}

// namesAndReasons returns the names of locks, sorted, and "name: reason"
// for each of them that gives a reason, in the same order.
func namesAndReasons(locks []lockv1alpha1.Lock) (names, reasons []string) {
	sorted := sortedByName(locks)
	names = make([]string, 0, len(sorted))
	for _, l := range sorted {
		names = append(names, l.Name)
		if l.Spec.Reason != "" {
			reasons = append(reasons, l.Name+": "+l.Spec.Reason)
		}
	}
	return names, reasons
}

// withReasons appends the Locks' reasons to a denial message, if any.
func withReasons(msg string, reasons []string) string {
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
