//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// updateDenialPrefix starts the API server's error for an update that
// lockguard refused under a ReadOnly Lock (docs/contract.md rule 16).
const updateDenialPrefix = `admission webhook "update.lockguard.core.navique.com" denied the request: resource is read-only under Lock(s) [`

// isUpdateDenial reports whether err is lockguard's refusal of an update.
func isUpdateDenial(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.HasPrefix(err.Error(), updateDenialPrefix)
}

// editAnnotation removes or rewrites the lock annotation of a locked
// target by hand: it must not unprotect it, and lockguard puts it back.
func (w *worker) editAnnotation(ctx context.Context) {
	t := w.targets[w.rng.IntN(len(w.targets))]
	if len(w.locksOn(t, live)) == 0 || t.uid == "" {
		return
	}
	var value any // nil removes it
	if w.rng.IntN(2) == 0 {
		value = "nothing-to-see"
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%s}}}`, lockv1alpha1.LockedAnnotation, jsonValue(value))
	if err := w.c.Patch(ctx, w.object(t, t.gvk), client.RawPatch(types.MergePatchType, patch)); err == nil {
		w.n.annotations.Add(1)
	}
}

func jsonValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

// update sends an UPDATE of a random target: a change of its spec (a
// third of them as a server-side dry run) or, with relabel, of its
// setLabel, which moves it in or out of the selectors. Under a ReadOnly
// Lock of the client's that the client read in force for its generation,
// of an object that carries the read-only label, the update must be
// refused (rule 16; relabelling out of a ReadOnly selector too); it must
// go through when no ReadOnly Lock covers the object.
func (w *worker) update(ctx context.Context, relabel bool) {
	t := w.targets[w.rng.IntN(len(w.targets))]
	if frozen := w.frozenTargets(); len(frozen) > 0 && w.rng.IntN(2) == 0 {
		t = frozen[w.rng.IntN(len(frozen))] // Half of the updates try a frozen one.
	}
	if !w.observe(ctx, t) || t.uid == "" || !t.labelDoubtSince.IsZero() {
		return
	}
	locks, known := w.classify(t)
	if !known {
		return
	}
	var frozen, forced []*lockRec
	for _, l := range locks {
		if !l.readOnly {
			continue
		}
		frozen = append(frozen, l)
		ok, err := w.inForce(ctx, l)
		if err != nil {
			return
		}
		if ok {
			forced = append(forced, l)
		}
	}
	// The object as it is now (after the Locks' status): the update sends
	// it back changed, at this resourceVersion.
	u := w.object(t, t.gvk)
	if err := w.c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil || u.GetUID() != t.uid || u.GetLabels()[setLabel] != t.label {
		return // Gone, replaced or relabelled: observe tells.
	}
	labelled := u.GetLabels()[lockv1alpha1.ReadOnlyLabel] == "true"
	kind := kindUpdate
	var opts []client.UpdateOption
	newLabel := t.label
	if relabel {
		kind = kindRelabel
		for newLabel == t.label {
			newLabel = []string{"", setValues[0], setValues[1]}[w.rng.IntN(3)]
		}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		if newLabel == "" {
			delete(labels, setLabel)
		} else {
			labels[setLabel] = newLabel
		}
		u.SetLabels(labels)
	} else {
		if w.rng.IntN(3) == 0 {
			kind = kindDryRunUpdate
			opts = append(opts, client.DryRunAll)
		}
		size, _, _ := unstructured.NestedInt64(u.Object, "spec", "size")
		if err := unstructured.SetNestedField(u.Object, size+1, "spec", "size"); err != nil {
			return
		}
	}
	k := &w.n.byKind[kind]
	k.sent.Add(1)
	sent := time.Now()
	err := w.c.Update(ctx, u, opts...)
	// The Locks read in force that had not expired by the answer
	// (terms_test.go): when every one had, either answer is right.
	mustRefuse := labelled && len(forced) > 0 && len(w.unexpired(forced)) > 0
	switch {
	case mustRefuse:
		k.locked.Add(1)
		countScope(k, frozen, false)
	case len(frozen) > 0:
		w.n.updatePending.Add(1)
	default:
		w.n.updateFree.Add(1)
	}
	if isUpdateDenial(err) {
		w.deniedByAudit(kind, err, updateDenialPrefix)
	}
	switch {
	case err == nil && mustRefuse:
		k.allowed.Add(1)
		w.violation(kind, "a %s of %s %s (uid %s, %s, labelled %s=true) was allowed while ReadOnly Locks %v, read in force, froze it",
			kind, t.gvk.Kind, w.ns+"/"+t.name, t.uid, labelText(t.label), lockv1alpha1.ReadOnlyLabel, seen(frozen, sent))
	case isUpdateDenial(err):
		switch {
		case mustRefuse:
			k.denied.Add(1)
			countScope(k, frozen, true)
		case len(frozen) > 0:
			w.n.updatePendingDenied.Add(1)
		default:
			w.n.updateStale.Add(1)
		}
		return
	case err != nil:
		k.errors.Add(1)
		if relabel && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			w.doubtLabel(t) // It may still happen.
		}
		return
	}
	if relabel {
		w.n.relabels.Add(1)
		w.relabelled(t, newLabel)
	}
}

// frozenTargets returns the targets a live ReadOnly Lock of the worker
// covers.
func (w *worker) frozenTargets() []*target {
	var out []*target
	for _, t := range w.targets {
		if slices.ContainsFunc(w.locksOn(t, live), func(l *lockRec) bool { return l.readOnly }) {
			out = append(out, t)
		}
	}
	return out
}

// relabelled records that t's setLabel changed to label: the selector
// Locks it left forget it, those it entered cover it from now on.
func (w *worker) relabelled(t *target, label string) {
	before := w.locksOn(t, live)
	t.label, t.labelSince = label, time.Now()
	for _, l := range before {
		if !l.covers(t) {
			l.forget(t)
		}
	}
	for _, l := range w.locksOn(t, live) {
		if l.sel != nil {
			t.unlockedSince = time.Time{} // Locked now: nothing to wait for.
		}
	}
}

// inForce reads Lock l and reports whether its ReadOnly condition says
// InForce for its generation while it is active.
func (w *worker) inForce(ctx context.Context, l *lockRec) (bool, error) {
	var lock lockv1alpha1.Lock
	if err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: l.name}, &lock); err != nil {
		return false, err
	}
	c := meta.FindStatusCondition(lock.Status.Conditions, lockv1alpha1.ConditionReadOnly)
	return lock.Status.Active && c != nil && c.Status == metav1.ConditionTrue && c.Reason == lockv1alpha1.ReasonInForce && c.ObservedGeneration == lock.Generation, nil
}
