//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// denialPrefix starts the API server's error for a delete lockguard denied.
const denialPrefix = `admission webhook "delete.lockguard.core.navique.com" denied the request: resource is protected by Lock(s) [`

// optInDenialPrefixes are denialPrefix for an opted-in kind's delete,
// which the chart's protect entry sends, or its protect-locked entry for
// an object labelled core.navique.com/protected (docs/optin.md).
var optInDenialPrefixes = []string{
	strings.Replace(denialPrefix, `"delete.`, `"protect.`, 1),
	strings.Replace(denialPrefix, `"delete.`, `"protect-locked.`, 1),
}

// denialMarker returns the prefix of err, a denial (isDenial), up to the
// Locks it names.
func denialMarker(err error) string {
	for _, p := range optInDenialPrefixes {
		if strings.HasPrefix(err.Error(), p) {
			return p
		}
	}
	return denialPrefix
}

// isDenial reports whether err is lockguard's denial of a delete.
func isDenial(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.HasPrefix(err.Error(), denialMarker(err))
}

// cascadeDenial is in the API server's error for an owner delete denied
// by rule 6's cascade guard (docs/contract.md: the message starts with it).
const cascadeDenial = `denied the request: resource would cascade-delete resources protected by Lock(s) [`

// isCascadeDenial reports whether err is lockguard's denial of an owner
// delete that would cascade to a locked object.
func isCascadeDenial(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.Contains(err.Error(), cascadeDenial)
}

// cascadeLocks returns the Lock names a cascade denial lists (at most the
// webhook's cap; the rest are counted, not named).
func cascadeLocks(err error) []string {
	_, rest, _ := strings.Cut(err.Error(), cascadeDenial)
	names, _, _ := strings.Cut(rest, "]")
	return strings.Fields(names)
}

// lockThenDelete locks an existing, unlocked target and sends its delete
// the moment the Lock's create is answered, without another request in
// between: the delete must be denied even though lockguard's caches may
// not have seen the Lock yet. The Lock is a selector Lock on the target's
// label a third of the time, when it has one (rule 15: the same
// strictness right after the create); ReadOnly a third of the time.
func (w *worker) lockThenDelete(ctx context.Context) {
	t := w.targets[w.rng.IntN(len(w.targets))]
	if locks, known := w.classify(t); len(locks) > 0 || !known {
		return
	}
	if !w.observe(ctx, t) || (t.owner != nil && !w.observe(ctx, t.owner)) || t.uid == "" || !t.labelDoubtSince.IsZero() {
		return
	}
	if locks, known := w.classify(t); len(locks) > 0 || !known {
		return // The read found it labelled into a selector.
	}
	undisturbed := t.undisturbed(time.Now())
	readOnly := w.rng.IntN(3) == 0
	var l *lockRec
	if t.label != "" && w.rng.IntN(3) == 0 && w.selectorLocks() < maxSelectorLocks {
		if l = w.createSelectorLockOn(ctx, &selectorRec{value: t.label, kinds: w.selectorKinds()}, readOnly, false); l.state != live {
			return
		}
	} else {
		w.seq++
		l = newLockRec(fmt.Sprintf("lock-%d", w.seq), t, nil, readOnly)
		lock := &lockv1alpha1.Lock{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
			Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: optInAPIVersion(t), Kind: t.gvk.Kind, Name: t.name}, Level: l.level()},
		}
		w.locks = append(w.locks, l)
		w.n.lockCreates.Add(1)
		if readOnly {
			w.n.readOnlyLocks.Add(1)
		}
		if err := w.c.Create(ctx, lock); err != nil {
			return
		}
		l.state, l.acked = live, time.Now()
	}
	if undisturbed {
		// No delete admitted before the Lock can be under way for the
		// object the client read just before creating it: from now on it
		// must stay, even if the delete's answer is lost (an error),
		// which observe below then catches.
		l.seenUID[t] = t.uid
	}
	t.unlockedSince = time.Time{}
	uid := t.uid
	raced := w.kindFor(kindRaced)
	w.n.byKind[raced].sent.Add(1)
	w.sending(t, raced)
	sent := time.Now()
	err := w.c.Delete(ctx, w.object(t, t.gvk), client.Preconditions{UID: &uid})
	w.judge(ctx, t, []*lockRec{l}, raced, sent, err)
	w.observe(ctx, t)
}

// classify returns the Locks that cover the target, and whether the
// worker knows them all: no create or delete of a Lock that may cover it
// has an unknown outcome, and, if it has selector Locks, the target's
// label is known.
func (w *worker) classify(t *target) ([]*lockRec, bool) {
	known := len(w.locksOn(t, creating)) == 0 && len(w.locksOn(t, deleting)) == 0
	if !t.labelDoubtSince.IsZero() {
		for _, l := range w.locks {
			if l.sel != nil && l.state != gone {
				known = false
			}
		}
	}
	return w.locksOn(t, live), known
}

// pick returns a target to delete: one whose unlocked delete is pending,
// half of the time, else any.
func (w *worker) pick() *target {
	if t := w.excepted(time.Now()); t != nil && w.rng.IntN(2) == 0 {
		return t
	}
	if w.rng.IntN(2) == 0 {
		for _, t := range w.targets {
			if !t.unlockedSince.IsZero() {
				return t
			}
		}
	}
	return w.targets[w.rng.IntN(len(w.targets))]
}

// deleteTarget tries to delete a target (sometimes as a dry run, or
// through another version) and checks the answer against the Locks the
// worker knows.
func (w *worker) deleteTarget(ctx context.Context) {
	t := w.pick()
	if !w.observe(ctx, t) || t.uid == "" {
		return
	}
	locks, known := w.classify(t)
	if !known {
		return
	}
	gvk, kind := t.gvk, kindDelete
	opts := []client.DeleteOption{client.Preconditions{UID: &t.uid}}
	switch r := w.rng.IntN(12); {
	case r < 2:
		kind = kindDryRun
		opts = append(opts, client.DryRunAll)
		if w.rng.IntN(2) == 0 {
			gvk.Version = "v1beta1"
		}
	case r < 5:
		kind = kindDeleteOtherVersion
		gvk.Version = "v1beta1"
	}
	if w.optIn {
		// PersistentVolumeClaims are served as v1 only.
		gvk, kind = t.gvk, w.kindFor(kind)
	}
	w.n.byKind[kind].sent.Add(1)
	w.sending(t, kind)
	sent := time.Now()
	err := w.c.Delete(ctx, w.object(t, gvk), opts...)
	w.judge(ctx, t, locks, kind, sent, err)
}

// judge checks the answer err to a request of kind that would delete t,
// sent at sent while locks (live Locks the worker saw created before)
// protected it.
func (w *worker) judge(ctx context.Context, t *target, locks []*lockRec, kind deleteKind, sent time.Time, err error) {
	answered := time.Now()
	k := &w.n.byKind[kind]
	dryRun := kinds[kind].dryRun
	locks = w.unexpired(locks)
	locked := len(locks) > 0
	if isDenial(err) {
		w.deniedByAudit(kind, err, denialMarker(err))
	}
	if locked {
		k.locked.Add(1)
		countScope(k, locks, false)
	} else {
		w.n.unlockedTries.Add(1)
	}
	switch {
	case err == nil && locked && w.excused(t, locks, sent):
		w.n.exceptionUsed.Add(1)
		if !dryRun {
			for _, l := range locks {
				l.forget(t)
			}
			t.uid = ""
		}
	case err == nil && locked:
		k.allowed.Add(1)
		w.violation(kind, "a %s of %s %s (%s) was allowed while Locks %v protected it", kind, t.gvk.Kind, w.ns+"/"+t.name, labelText(t.label), seen(locks, sent))
		if !dryRun {
			for _, l := range locks {
				l.forget(t) // Counted once.
			}
			t.uid = ""
		}
	case err == nil:
		w.n.unlockedOK.Add(1)
		if !dryRun {
			if !t.unlockedSince.IsZero() {
				w.recordWait(time.Since(t.unlockedSince))
			}
			t.uid, t.unlockedSince = "", time.Time{}
		}
	case isDenial(err):
		if x := w.owed(t, locks, sent, answered); locked && x != nil && !w.n.apiDown.during(sent, answered) {
			w.violation(kind, "a %s of %s %s was refused though LockException %s let it through Locks %v (created %s before the request was sent, expiring %s after its answer): %v",
				kind, t.gvk.Kind, w.ns+"/"+t.name, x.name, x.locks, sent.Sub(x.acked).Round(time.Millisecond), x.expires.Sub(answered).Round(time.Millisecond), err)
		} else if locked && (x != nil || w.excused(t, locks, sent)) {
			// An exception that owed the delete its passage while
			// kube-apiserver was restarting: lockguard honours one only
			// once the API server confirms it (rule 20), and refuses when
			// it cannot ask.
			w.n.exceptionRefused.Add(1)
		}
		if locked {
			k.denied.Add(1)
			countScope(k, locks, true)
		} else {
			w.n.staleDenials.Add(1)
			w.pending(t, dryRun)
		}
	case !locked && isCascadeDenial(err):
		// t owns a locked object: its delete is denied for the cascade it
		// would start (rule 6), which is right while the client still
		// has a Lock the denial names. Nothing is owed then.
		if w.holdsAnyOf(cascadeLocks(err)) {
			w.n.cascadeDenials.Add(1)
			t.unlockedSince = time.Time{}
		} else {
			w.n.staleDenials.Add(1)
			w.pending(t, dryRun)
		}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		w.observe(ctx, t) // Gone or replaced: the invariant check says whether that was allowed.
	default:
		k.errors.Add(1)
		if w.optIn && w.logged < 5 {
			w.logged++
			w.logf("%s: a %s of %s (locked %v) failed: %v", w.ns, kind, t, locked, err)
		}
		if !locked {
			w.pending(t, dryRun)
			if !dryRun {
				t.doubt()
			}
		}
	}
}

// countScope counts a locked request of kind k by the kinds of Locks
// that protected it: sent (denied false) or denied.
func countScope(k *kindCounts, locks []*lockRec, denied bool) {
	sel := slices.ContainsFunc(locks, func(l *lockRec) bool { return l.sel != nil })
	ro := slices.ContainsFunc(locks, func(l *lockRec) bool { return l.readOnly })
	selCount, roCount := &k.bySelector, &k.byReadOnly
	if denied {
		selCount, roCount = &k.selectorDenied, &k.readOnlyDenied
	}
	if sel {
		selCount.Add(1)
	}
	if ro {
		roCount.Add(1)
	}
}

// seen names the Locks and how long before sent the client saw each.
func seen(locks []*lockRec, sent time.Time) []string {
	names := make([]string, 0, len(locks))
	for _, l := range locks {
		names = append(names, fmt.Sprintf("%s (seen %s before)", l.describe(), sent.Sub(l.acked).Round(time.Millisecond)))
	}
	return names
}

// pending records that the unlocked t still waits for its delete.
func (w *worker) pending(t *target, dryRun bool) {
	if !dryRun && t.unlockedSince.IsZero() {
		t.unlockedSince = time.Now()
	}
}

func (w *worker) recordWait(d time.Duration) {
	for {
		cur := w.n.slowestUnlock.Load()
		if int64(d) <= cur || w.n.slowestUnlock.CompareAndSwap(cur, int64(d)) {
			return
		}
	}
}

// deleteCollection deletes every Stack, or every PostgresCluster, of the
// namespace in one request (kubectl delete --all), a third of the time as
// a dry run. A request that includes a locked object must be denied, and
// the locked objects must survive it; a dry run must delete nothing at
// all.
func (w *worker) deleteCollection(ctx context.Context) {
	if w.exceptionLives(time.Now()) {
		return // It would pierce its members' deletes outside judge.
	}
	gvk := stackGVK
	if w.rng.IntN(3) == 0 {
		gvk = pgGVK
	}
	type member struct {
		t      *target
		uid    types.UID // before the request; empty if absent
		locks  []*lockRec
		stable bool // nothing but this request may remove it (target.undisturbed)
	}
	var members []member
	for _, t := range w.targets {
		if t.gvk != gvk {
			continue
		}
		if !w.observe(ctx, t) || (t.owner != nil && !w.observe(ctx, t.owner)) {
			return
		}
		locks, known := w.classify(t)
		if !known {
			return
		}
		members = append(members, member{t: t, uid: t.uid, locks: locks, stable: t.undisturbed(time.Now())})
	}
	kind := kindCollection
	opts := []client.DeleteAllOfOption{client.InNamespace(w.ns)}
	if w.rng.IntN(3) == 0 {
		kind = kindDryRunCollection
		opts = append(opts, client.DryRunAll)
	}
	dryRun := kinds[kind].dryRun
	k := &w.n.byKind[kind]
	var locked []member
	for _, m := range members {
		if m.uid != "" && len(m.locks) > 0 {
			locked = append(locked, m)
		}
		w.sending(m.t, kind)
	}
	var lockedBy []*lockRec
	for _, m := range locked {
		lockedBy = append(lockedBy, m.locks...)
	}
	if len(locked) > 0 {
		k.locked.Add(1)
		countScope(k, lockedBy, false)
	} else {
		w.n.unlockedTries.Add(1)
	}
	k.sent.Add(1)
	sent := time.Now()
	err := w.c.DeleteAllOf(ctx, w.object(&target{name: ""}, gvk), opts...)
	// Those whose Locks all expired before the answer may have gone.
	locked = slices.DeleteFunc(locked, func(m member) bool { return len(w.unexpired(m.locks)) == 0 })
	if isDenial(err) {
		w.deniedByAudit(kind, err, denialMarker(err))
	}
	switch {
	case err == nil && len(locked) > 0:
		k.allowed.Add(1)
		for _, m := range locked {
			w.violation(kind, "a %s of %s in %s was allowed while Locks %v protected %s (uid %s, %s)", kind, gvk.Kind, w.ns, seen(m.locks, sent), m.t.name, m.uid, labelText(m.t.label))
			for _, l := range m.locks {
				l.forget(m.t) // Counted once.
			}
		}
	case err == nil:
		w.n.unlockedOK.Add(1)
	case isDenial(err):
		if len(locked) > 0 {
			k.denied.Add(1)
			countScope(k, lockedBy, true)
		} else {
			w.n.staleDenials.Add(1)
		}
	default:
		k.errors.Add(1)
		if !dryRun {
			for _, m := range members {
				if len(m.locks) == 0 {
					m.t.doubt()
				}
			}
		}
	}
	// Each member: a locked one must still be there (observe checks); a
	// dry run must have left every stable one alone; an unlocked one that
	// survived a real deletecollection is pending.
	for _, m := range members {
		w.observe(ctx, m.t)
		switch {
		case m.uid == "" || len(m.locks) > 0:
		case dryRun && m.t.uid != m.uid && m.stable:
			// (The garbage collector, or an earlier delete whose answer
			// was lost, may remove another one any moment, rightly when no
			// Lock protects it.)
			w.violation(kind, "a %s of %s in %s deleted %s (uid %s), which no Lock protected: a dry run must delete nothing", kind, gvk.Kind, w.ns, m.t.name, m.uid)
		case !dryRun && m.t.uid == m.uid:
			w.pending(m.t, false)
		}
	}
}

// cascade deletes the owner Stack of a locked PostgresCluster, when the
// Stack itself is unlocked: the garbage collector's delete of the child
// must be denied, and the child must survive.
func (w *worker) cascade(ctx context.Context) {
	for _, t := range w.targets {
		if t.owner == nil {
			continue
		}
		childLocks, known := w.classify(t)
		ownerLocks, ownerKnown := w.classify(t.owner)
		if len(childLocks) == 0 || !known || len(ownerLocks) > 0 || !ownerKnown {
			continue
		}
		if !w.observe(ctx, t) || !w.observe(ctx, t.owner) || t.uid == "" || t.owner.uid == "" || t.ownerRef != t.owner.uid {
			continue
		}
		k := &w.n.byKind[kindCascade]
		k.sent.Add(1)
		k.locked.Add(1)
		countScope(k, childLocks, false)
		w.sending(t.owner, kindCascade)
		err := w.c.Delete(ctx, w.object(t.owner, stackGVK), client.Preconditions{UID: &t.owner.uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		// The owner itself is unlocked: judge it as such (its errors count
		// under this kind).
		w.n.unlockedTries.Add(1)
		switch {
		case err == nil:
			k.allowed.Add(1)
			w.n.unlockedOK.Add(1)
			t.owner.uid, t.owner.unlockedSince = "", time.Time{}
		case isCascadeDenial(err):
			k.denied.Add(1)
			countScope(k, childLocks, true)
		case isDenial(err):
			w.n.staleDenials.Add(1)
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			w.observe(ctx, t.owner)
		default:
			k.errors.Add(1)
			t.owner.doubt()
		}
		return
	}
}

// settle retries the pending unlocked deletes until they succeed or ctx
// ends, and returns what was still pending after the last pass: the last
// one the API server answered throughout, and why the passes after it
// could not finish.
func (w *worker) settle(ctx context.Context) []string {
	last := []string{fmt.Sprintf("%s: no pass finished", w.ns)}
	for {
		left, err := w.settlePass(ctx)
		switch {
		case err == nil:
			last = left
		case ctx.Err() == nil || len(last) == 0:
			last = append(left, fmt.Sprintf("%s: the API server does not answer: %v", w.ns, err))
		}
		if (err == nil && len(left) == 0) || ctx.Err() != nil {
			return last
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// settlePass sends the delete of each target still waiting for one, and
// returns those still waiting; err says the pass could not read what it
// needed.
func (w *worker) settlePass(ctx context.Context) ([]string, error) {
	if err := w.resolveErr(ctx); err != nil {
		return nil, err
	}
	var left []string
	for _, t := range w.targets {
		if t.unlockedSince.IsZero() {
			continue
		}
		if locks, known := w.classify(t); len(locks) > 0 || !known {
			t.unlockedSince = time.Time{} // Locked since: nothing to wait for.
			continue
		}
		if !w.observe(ctx, t) {
			return left, fmt.Errorf("reading %s %s/%s failed", t.gvk.Kind, w.ns, t.name)
		}
		if t.uid == "" {
			t.unlockedSince = time.Time{} // Gone: its delete went through (or a cascade did it).
			continue
		}
		kind := w.kindFor(kindDelete)
		w.n.byKind[kind].sent.Add(1)
		w.sending(t, kind)
		sent := time.Now()
		err := w.c.Delete(ctx, w.object(t, t.gvk), client.Preconditions{UID: &t.uid})
		w.judge(ctx, t, nil, kind, sent, err)
		if !t.unlockedSince.IsZero() {
			left = append(left, fmt.Sprintf("%s %s/%s (waiting %s, last error %v)", t.gvk.Kind, w.ns, t.name, time.Since(t.unlockedSince).Round(time.Second), err))
		}
	}
	return left, nil
}
