//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// resolve settles the Locks whose create or delete had an unknown
// outcome, by reading them. It returns false when the API server does not
// answer.
func (w *worker) resolve(ctx context.Context) bool { return w.resolveErr(ctx) == nil }

// resolveErr is resolve, with the API server's error.
func (w *worker) resolveErr(ctx context.Context) error {
	defer w.expire(time.Now())
	kept := w.locks[:0]
	for i, l := range w.locks {
		if l.state == creating || l.state == deleting {
			err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: l.name}, &lockv1alpha1.Lock{})
			switch {
			case err == nil && l.state == creating:
				l.state, l.acked = live, time.Now()
				w.observeLock(ctx, l)
			case err == nil:
				l.state = live // The delete did not happen; acked is unchanged.
			case apierrors.IsNotFound(err):
				l.state = gone
			default:
				// Keep this Lock and the ones not yet read (kept shares
				// w.locks' array: append moves them down in place).
				w.locks = append(kept, w.locks[i:]...)
				return fmt.Errorf("reading Lock %s/%s: %w", w.ns, l.name, err)
			}
		}
		if l.state != gone {
			kept = append(kept, l)
		}
	}
	w.locks = kept
	return nil
}

// maxSelectorLocks bounds a worker's selector Locks (live or with an
// unknown outcome), so that some of its objects stay unlocked.
const maxSelectorLocks = 2

// createLock creates a Lock on a random target (at most two per target),
// through either served version of its apiVersion; one in ten targets
// another group and never protects anything. One in three is a selector
// Lock instead; one in three of either has level ReadOnly.
func (w *worker) createLock(ctx context.Context) {
	readOnly := w.rng.IntN(3) == 0
	if w.rng.IntN(3) == 0 {
		w.createSelectorLock(ctx, readOnly)
		return
	}
	t := w.targets[w.rng.IntN(len(w.targets))]
	if len(w.locksOn(t, live)) >= 2 {
		return
	}
	w.seq++
	l := newLockRec(fmt.Sprintf("lock-%d", w.seq), t, nil, readOnly)
	ref := lockv1alpha1.TargetReference{APIVersion: optInAPIVersion(t), Kind: t.gvk.Kind, Name: t.name}
	switch r := w.rng.IntN(10); {
	case r == 0:
		ref.APIVersion, l.invalid = "apps/v1", true
	case r < 4 && !w.optIn:
		ref.APIVersion = lockv1alpha1.Group + "/v1beta1"
	}
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
		Spec:       lockv1alpha1.LockSpec{TargetRef: ref, Reason: "chaos", Level: l.level()},
	}
	w.withTerms(l, lock)
	w.locks = append(w.locks, l)
	w.n.lockCreates.Add(1)
	if readOnly {
		w.n.readOnlyLocks.Add(1)
	}
	if err := w.c.Create(ctx, lock); err != nil {
		return // Unknown: resolve reads it.
	}
	l.state, l.acked = live, time.Now()
	if !l.invalid {
		t.unlockedSince = time.Time{}
		w.observe(ctx, t)
	}
}

// level returns the Lock's spec.level.
func (l *lockRec) level() lockv1alpha1.LockLevel {
	if l.readOnly {
		return lockv1alpha1.LevelReadOnly
	}
	return lockv1alpha1.LevelCanNotDelete
}

// createSelectorLock creates a selector Lock on one of setValues (at
// most maxSelectorLocks), a quarter of them limited to one kind, half
// written with matchExpressions.
func (w *worker) createSelectorLock(ctx context.Context, readOnly bool) {
	if w.selectorLocks() >= maxSelectorLocks {
		return
	}
	sel := &selectorRec{value: setValues[w.rng.IntN(len(setValues))], expression: w.rng.IntN(2) == 0}
	switch {
	case w.optIn && w.rng.IntN(4) > 0:
		// Three in four name the opted-in kind; the others, without
		// kinds, cover none of the worker's objects (matches).
		sel.kinds = w.selectorKinds()
	case !w.optIn && w.rng.IntN(4) == 0:
		sel.kinds = []string{[]string{stackGVK.Kind, pgGVK.Kind}[w.rng.IntN(2)]}
	}
	if l := w.createSelectorLockOn(ctx, sel, readOnly, true); l.state == live {
		w.observeLock(ctx, l)
	}
}

// selectorLocks returns how many selector Locks the worker has, live or
// with an unknown outcome.
func (w *worker) selectorLocks() int {
	n := 0
	for _, l := range w.locks {
		if l.sel != nil && l.state != gone {
			n++
		}
	}
	return n
}

// createSelectorLockOn creates a selector Lock with sel and returns its
// record, live when the create was answered; it sends no other request.
// With terms, the Lock may expire or be in Audit (withTerms).
func (w *worker) createSelectorLockOn(ctx context.Context, sel *selectorRec, readOnly, terms bool) *lockRec {
	w.seq++
	l := newLockRec(fmt.Sprintf("sel-%d", w.seq), nil, sel, readOnly)
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
		Spec:       lockv1alpha1.LockSpec{Selector: sel.spec(), Reason: "chaos", Level: l.level()},
	}
	if terms {
		w.withTerms(l, lock)
	}
	w.locks = append(w.locks, l)
	w.n.lockCreates.Add(1)
	w.n.selectorLocks.Add(1)
	if readOnly {
		w.n.readOnlyLocks.Add(1)
	}
	if err := w.c.Create(ctx, lock); err != nil {
		return l // Unknown: resolve reads it.
	}
	l.state, l.acked = live, time.Now()
	for _, t := range w.targets {
		if l.covers(t) {
			t.unlockedSince = time.Time{}
		}
	}
	return l
}

// deleteLock deletes a random live Lock, after checking its target.
func (w *worker) deleteLock(ctx context.Context) {
	var candidates []*lockRec
	for _, l := range w.locks {
		if l.state == live {
			candidates = append(candidates, l)
		}
	}
	if len(candidates) == 0 {
		return
	}
	l := candidates[w.rng.IntN(len(candidates))]
	if !w.observeLock(ctx, l) {
		return
	}
	l.state = deleting
	w.n.lockDeletes.Add(1)
	err := w.c.Delete(ctx, &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name}})
	if err == nil || apierrors.IsNotFound(err) {
		l.state = gone
	}
}

// holdsAnyOf reports whether the client has a Lock (live, or with an
// unknown outcome) of one of names.
func (w *worker) holdsAnyOf(names []string) bool {
	for _, l := range w.locks {
		if l.state != gone && slices.Contains(names, l.name) {
			return true
		}
	}
	return false
}
