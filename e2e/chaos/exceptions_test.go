//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"slices"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Break-glass exceptions in the mix (docs/contract.md rule 20, issue 39).
//
// Now and then the client creates a LockException for one of its locked
// objects, for itself (the client's user, from a SelfSubjectReview),
// naming every Lock it knows covers the object, for DELETE, expiring
// exceptionMin to exceptionMax later; its deletes then pick that object
// half of the time. A delete a Lock protected is then allowed only if an exception
// the client created (its outcome known or not) names the object and
// every such Lock and had not expired when the delete was sent (the
// webhook decides after that): otherwise it is a violation, as before,
// and so is an allowed one sent at or after the exception's expiresAt. A
// refusal while such an exception lives is counted apart, not judged:
// lockguard finds exceptions in a cache, which may not have it yet (it
// errs towards refusing). While an exception of the client lives, it
// sends no deletecollection (whose members' deletes the exception would
// pierce outside judge).
const exceptionMin, exceptionMax = 3 * time.Second, 8 * time.Second

// exceptionRec is an exception the client created (or may have: its
// create's answer was lost).
type exceptionRec struct {
	target  *target
	locks   []string
	expires time.Time
}

// user returns the client's user name, asked once.
func (w *worker) user(ctx context.Context) (string, error) {
	if w.username == "" {
		review := &authenticationv1.SelfSubjectReview{}
		if err := w.c.Create(ctx, review); err != nil {
			return "", err
		}
		w.username = review.Status.UserInfo.Username
	}
	return w.username, nil
}

// breakGlass creates an exception for a locked object; pick then prefers
// the object for a while, so that its deletes meet the exception.
func (w *worker) breakGlass(ctx context.Context) {
	t := w.targets[w.rng.IntN(len(w.targets))]
	if !w.observe(ctx, t) || t.uid == "" {
		return
	}
	locks, known := w.classify(t)
	if !known || len(locks) == 0 || slices.ContainsFunc(locks, func(l *lockRec) bool { return !l.expires.IsZero() }) {
		return
	}
	user, err := w.user(ctx)
	if err != nil {
		return
	}
	var names []string
	for _, l := range locks {
		names = append(names, l.name)
	}
	slices.Sort(names)
	span := exceptionMin + time.Duration(w.rng.Int64N(int64(exceptionMax-exceptionMin)))
	x := exceptionRec{target: t, locks: names, expires: time.Now().Add(span).Truncate(time.Second)}
	w.seq++
	e := &lockv1alpha1.LockException{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: fmt.Sprintf("x-%d", w.seq)},
		Spec: lockv1alpha1.LockExceptionSpec{TargetRef: lockv1alpha1.TargetReference{Kind: t.gvk.Kind, Name: t.name}, Locks: names,
			Operations: []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}, Reason: "chaos", User: user,
			ExpiresAt: metav1.NewTime(x.expires)}}
	w.exceptions = append(w.exceptions, x) // Before the create: its outcome may be lost.
	w.n.exceptions.Add(1)
	_ = w.c.Create(ctx, e) // Refused or lost: the record stays, it only excuses.
}

// excepted returns a target an exception of the client names, that has
// not expired, or nil.
func (w *worker) excepted(now time.Time) *target {
	for _, x := range w.exceptions {
		if now.Before(x.expires) && x.target.uid != "" {
			return x.target
		}
	}
	return nil
}

// excused reports whether an exception the client created lets a delete
// of t sent at sent through every one of locks; at any time it was live
// for sent zero (an object found gone, whose delete's answer may have
// been lost: the records are kept a minute past their expiry).
func (w *worker) excused(t *target, locks []*lockRec, sent time.Time) bool {
	for _, x := range w.exceptions {
		if x.target != t || (!sent.IsZero() && !sent.Before(x.expires)) {
			continue
		}
		if !slices.ContainsFunc(locks, func(l *lockRec) bool { return !slices.Contains(x.locks, l.name) }) {
			return true
		}
	}
	return false
}

// exceptionLives reports whether an exception of the client may still let
// a delete through at now (its expiresAt, and a second for clocks), and
// drops the records a minute past theirs.
func (w *worker) exceptionLives(now time.Time) bool {
	w.exceptions = slices.DeleteFunc(w.exceptions, func(x exceptionRec) bool { return now.After(x.expires.Add(time.Minute)) })
	return slices.ContainsFunc(w.exceptions, func(x exceptionRec) bool { return now.Before(x.expires.Add(time.Second)) })
}
