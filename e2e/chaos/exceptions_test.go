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
// and so is an allowed one sent at or after the exception's expiresAt.
// A refusal that an exception owed is a violation too (owed): the
// exception's create was answered before the delete was sent (lockguard
// reads an exception its cache has not seen from the API server before
// refusing, docs/contract.md rule 20), it names the object and every
// Lock that protected it, and the refusal's answer came before its
// expiresAt (the webhook decided before that, by this process's clock,
// which is lockguard's, as for a Lock's expiry: terms_test.go). The
// client never deletes its exceptions. A refusal while an exception
// whose create's outcome is unknown, or that expired while the request
// was in flight, lived is counted apart, not judged. While an exception
// of the client lives, it sends no deletecollection (whose members'
// deletes the exception would pierce outside judge).
const exceptionMin, exceptionMax = 3 * time.Second, 8 * time.Second

// exceptionRec is an exception the client created (or may have: its
// create's answer was lost).
type exceptionRec struct {
	name    string
	target  *target
	locks   []string
	expires time.Time
	// acked is when the create was answered with success; zero while
	// it is not known to exist (refused, or its answer lost).
	acked time.Time
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
	w.seq++
	x := exceptionRec{name: fmt.Sprintf("x-%d", w.seq), target: t, locks: names, expires: time.Now().Add(span).Truncate(time.Second)}
	e := &lockv1alpha1.LockException{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: x.name},
		Spec: lockv1alpha1.LockExceptionSpec{TargetRef: lockv1alpha1.TargetReference{Kind: t.gvk.Kind, Name: t.name}, Locks: names,
			Operations: []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}, Reason: "chaos", User: user,
			ExpiresAt: metav1.NewTime(x.expires)}}
	w.exceptions = append(w.exceptions, x) // Before the create: its outcome may be lost.
	i := len(w.exceptions) - 1
	w.n.exceptions.Add(1)
	if err := w.c.Create(ctx, e); err == nil {
		w.exceptions[i].acked = time.Now()
	} // Refused or lost: the record stays, it only excuses.
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

// owed returns the exception the client created that owed a delete of t
// sent at sent and refused with an answer at answered its passage
// through every one of locks: its create was answered before sent, and
// answered is before its expiresAt; nil for none.
func (w *worker) owed(t *target, locks []*lockRec, sent, answered time.Time) *exceptionRec {
	for i := range w.exceptions {
		x := &w.exceptions[i]
		if x.target != t || x.acked.IsZero() || !x.acked.Before(sent) || !answered.Before(x.expires) {
			continue
		}
		if !slices.ContainsFunc(locks, func(l *lockRec) bool { return !slices.Contains(x.locks, l.name) }) {
			return x
		}
	}
	return nil
}

// exceptionLives reports whether an exception of the client may still let
// a delete through at now (its expiresAt, and a second for clocks), and
// drops the records a minute past theirs.
func (w *worker) exceptionLives(now time.Time) bool {
	w.exceptions = slices.DeleteFunc(w.exceptions, func(x exceptionRec) bool { return now.After(x.expires.Add(time.Minute)) })
	return slices.ContainsFunc(w.exceptions, func(x exceptionRec) bool { return now.Before(x.expires.Add(time.Second)) })
}
