//go:build chaos

package chaos

import (
	"context"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// observeLock observes what Lock l may cover: its target, or every object
// of the worker for a selector Lock. It returns false when the API server
// does not answer.
func (w *worker) observeLock(ctx context.Context, l *lockRec) bool {
	if l.invalid {
		return true
	}
	if l.sel == nil {
		return w.observe(ctx, l.target)
	}
	for _, t := range w.targets {
		if !w.observe(ctx, t) {
			return false
		}
	}
	return true
}

// observe reads t and checks the invariant for it: an object that a live
// Lock protected when the client saw it must still be there, the same
// object (a recreated one has another UID). It returns false when the API
// server does not answer.
//
// A Lock protects the object the client sees after the Lock's create was
// answered, from then on, if no delete admitted before the Lock existed
// can still be under way (target.undisturbed). Otherwise (the garbage
// collector may be deleting the child of a deleted owner; a delete of the
// client's lost its answer) it protects it from when the client sees the
// lock annotation name the Lock: the reconciler wrote the object after the
// Lock existed, and the API server re-runs admission for any delete whose
// object changed under it (the storage's optimistic delete), so from then
// on every delete is decided with the Lock in place. (Between the two, an
// in-flight delete admitted before the Lock can still complete: lockguard
// decides at admission and cannot undo it. status.active says when that
// window is closed.)
func (w *worker) observe(ctx context.Context, t *target) bool {
	u := w.object(t, t.gvk)
	err := w.c.Get(ctx, client.ObjectKeyFromObject(u), u)
	now := time.Now()
	w.expire(now) // An expired Lock's objects may go (terms_test.go).
	var uid, ownerRef types.UID
	var annotated []string
	switch {
	case err == nil && u.GetDeletionTimestamp() != nil:
		// Deleted, held by a finalizer (a PersistentVolumeClaim's
		// kubernetes.io/pvc-protection until no pod uses it): its delete
		// was admitted, so for the checker it is gone.
	case err == nil:
		uid = u.GetUID()
		for _, r := range u.GetOwnerReferences() {
			ownerRef = r.UID
		}
		annotated = strings.Split(u.GetAnnotations()[lockv1alpha1.LockedAnnotation], ",")
	case apierrors.IsNotFound(err):
	default:
		return false
	}
	ownerRead := 0 // 0 not yet, 1 read, -1 the API server did not answer
	protects := func(l *lockRec) bool {
		if slices.Contains(annotated, l.name) {
			return true
		}
		if ownerRead == 0 {
			ownerRead = 1
			if t.owner != nil && ownerRef != "" && !w.observe(ctx, t.owner) {
				ownerRead = -1
			}
		}
		probe := *t
		probe.ownerRef = ownerRef
		// A selector Lock covers the object from when both the Lock and
		// its label were there.
		start := l.acked
		if l.sel != nil && t.labelSince.After(start) {
			start = t.labelSince
		}
		return ownerRead == 1 && probe.undisturbed(start)
	}
	// The Locks that covered the object as the client knew it (its label
	// before this read): the one that went, if it went.
	covered := w.locksOn(t, live)
	for _, l := range covered {
		if l.seenUID[t] != "" && l.seenUID[t] != uid && w.excused(t, covered, time.Time{}) {
			// A delete whose answer was lost may have gone through an
			// exception the client created (exceptions_test.go).
			w.n.exceptionUsed.Add(1)
			for _, other := range covered {
				other.forget(t)
			}
			continue
		}
		if l.seenUID[t] != "" && l.seenUID[t] != uid {
			gone := "is gone"
			if uid != "" {
				gone = "was replaced by uid " + string(uid)
			}
			w.violation(t.lastKind, "%s %s (uid %s, %s) %s while Lock %s protected it (created and seen %s ago, seen the object after that); the last request that could have removed it: %s",
				t.gvk.Kind, w.ns+"/"+t.name, l.seenUID[t], labelText(t.label), gone, l.describe(), time.Since(l.acked).Round(time.Millisecond), t.lastKind)
			for _, other := range w.locksOn(t, live) {
				other.forget(t) // Counted once.
			}
		}
		if l.seenUID[t] == "" && l.sawUID[t] != "" && l.sawUID[t] != uid {
			w.n.lateDeletes.Add(1)
			w.logf("%s %s (uid %s), seen after Lock %s's create was answered but before the Lock protected it, is gone: the last request that could have removed it: %s",
				t.gvk.Kind, w.ns+"/"+t.name, l.sawUID[t], l.name, t.lastKind)
		}
		l.sawUID[t] = uid
	}
	// The label as read: only the client changes it, so it is the one the
	// client knows, unless a change of it with an unknown outcome may
	// still be under way.
	if err == nil {
		t.readOnlyLabel = u.GetLabels()[lockv1alpha1.ReadOnlyLabel] == "true"
		label := u.GetLabels()[setLabel]
		if t.labelDoubtSince.IsZero() || now.Sub(t.labelDoubtSince) > inFlightFor {
			if !t.labelDoubtSince.IsZero() || label != t.label {
				t.labelSince = now
			}
			t.label, t.labelDoubtSince = label, time.Time{}
		}
	} else {
		t.readOnlyLabel = false
	}
	for _, l := range covered {
		if !l.covers(t) {
			l.forget(t) // It left the selector.
		}
	}
	for _, l := range w.locksOn(t, live) {
		if l.seenUID[t] == "" && uid != "" && protects(l) {
			l.seenUID[t] = uid
		}
	}
	t.uid, t.ownerRef = uid, ownerRef
	return true
}

// audit checks every target against the worker's live Locks once more.
// It returns false when the API server did not answer for some of them.
func (w *worker) audit(ctx context.Context) bool {
	if !w.resolve(ctx) {
		return false
	}
	ok := true
	for _, t := range w.targets {
		ok = w.observe(ctx, t) && ok
	}
	return ok
}
