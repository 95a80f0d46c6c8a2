//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// The kinds the workload locks and deletes.
var (
	stackGVK = framework.StackGVK
	pgGVK    = framework.PostgresClusterGVK
)

// What each client works on, alone in its namespace.
const (
	stacksPerClient = 4
	pgsPerClient    = 3 // each owned by a Stack
)

// inFlightFor bounds how long a request whose answer was lost may still
// complete in the API server: its request timeout (60s by default) bounds
// the storage call, with a margin.
const inFlightFor = 90 * time.Second

// denialPrefix starts the API server's error for a delete lockguard denied.
const denialPrefix = `admission webhook "delete.lockguard.core.navique.com" denied the request: resource is protected by Lock(s) [`

// isDenial reports whether err is lockguard's denial of a delete.
func isDenial(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.HasPrefix(err.Error(), denialPrefix)
}

// cascadeDenial is in the API server's error for an owner delete denied
// by rule 6's cascade guard (LOCK-SPEC: the message starts with it).
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

// counts are the run's counters.
type counts struct {
	byKind        [numKinds + 1]kindCounts
	unlockedTries atomic.Int64 // requests that would delete only unlocked objects
	unlockedOK    atomic.Int64 // of those, answered with success
	staleDenials  atomic.Int64 // of those, denied by a Lock already deleted (a cache catching up)
	// cascadeDenials counts deletes of an unlocked owner denied for the
	// locked dependents they would cascade to, while the client still had
	// a Lock the denial names.
	cascadeDenials atomic.Int64
	lockCreates    atomic.Int64
	lockDeletes    atomic.Int64
	annotations    atomic.Int64 // hand edits of the lock annotation
	slowestUnlock  atomic.Int64 // longest time an unlocked target waited for its delete, ns
	// lateDeletes counts objects seen after their Lock's create was
	// answered that went before the Lock protected them (see observe): a
	// delete admitted before the Lock existed completed after.
	lateDeletes atomic.Int64
}

// sum adds up one counter over every kind.
func (n *counts) sum(field func(*kindCounts) *atomic.Int64) int64 {
	var s int64
	for i := range n.byKind {
		s += field(&n.byKind[i]).Load()
	}
	return s
}

func (n *counts) attempts() int64 { return n.sum(func(k *kindCounts) *atomic.Int64 { return &k.sent }) }
func (n *counts) denials() int64 {
	return n.sum(func(k *kindCounts) *atomic.Int64 { return &k.denied })
}
func (n *counts) errors() int64 { return n.sum(func(k *kindCounts) *atomic.Int64 { return &k.errors }) }
func (n *counts) violations() int64 {
	return n.sum(func(k *kindCounts) *atomic.Int64 { return &k.violations })
}

// lockState is what a client knows of one of its Locks.
type lockState int

const (
	creating lockState = iota // the create's outcome is unknown
	live                      // created (the client saw it) and not yet being deleted
	deleting                  // the delete's outcome is unknown
	gone                      // the client saw it deleted (or never created)
)

// lockRec is a Lock a worker created.
type lockRec struct {
	name   string
	target *target
	state  lockState
	// acked is when the client saw the Lock exist (the create's answer).
	acked time.Time
	// seenUID is the UID of the target the client saw exist after acked:
	// from then on, until the client deletes the Lock, that object must
	// exist.
	seenUID types.UID
	// sawUID is the UID of the target the client first saw after acked,
	// protected or not yet.
	sawUID  types.UID
	invalid bool // targets another group: never protects
}

// forget drops what the Lock saw of its target, once a violation on it
// is counted.
func (l *lockRec) forget() { l.seenUID, l.sawUID = "", "" }

// target is an object a worker may lock and delete.
type target struct {
	gvk      schema.GroupVersionKind
	name     string
	owner    *target // a PostgresCluster's owner Stack, for cascades
	children []*target
	uid      types.UID
	// ownerRef is the owner UID the object's ownerReference names, as last
	// read; empty when it has none.
	ownerRef types.UID
	// lastKind is the kind of the last request that could have removed
	// the object (kindNone before any): what a disappearance is blamed on.
	lastKind deleteKind
	// unlockedSince is when a delete of the unlocked target was first
	// refused; zero when none is pending.
	unlockedSince time.Time
	// doubtSince is when a real delete of the object was last answered
	// with an error that does not say whether it happened: the request may
	// still be in flight, admitted, for up to inFlightFor.
	doubtSince time.Time
}

func (t *target) String() string { return t.gvk.Kind + "/" + t.name }

// undisturbed reports whether no delete admitted before now can still be
// under way for the object: the garbage collector has no reason to delete
// it (it has no owner, or its owner is the one it names: UIDs are never
// reused, so that owner was never deleted), and no delete of the client's
// may still be in flight. t and its owner must just have been observed.
func (t *target) undisturbed(now time.Time) bool {
	intact := t.ownerRef == "" || (t.owner != nil && t.owner.uid == t.ownerRef)
	return intact && (t.doubtSince.IsZero() || now.Sub(t.doubtSince) > inFlightFor)
}

// doubt records that a real delete of the unlocked t was answered with an
// error that does not say whether it happened. (A request on a locked
// object is sent after its Locks: if it ever completes, that is a
// violation, so it casts no doubt.)
func (t *target) doubt() { t.doubtSince = time.Now() }

// worker is one client, alone in its namespace, so that it knows every
// Lock there and when it saw it.
type worker struct {
	id      int
	ns      string
	c       client.Client
	rng     *rand.Rand
	n       *counts
	targets []*target
	locks   []*lockRec
	seq     int
	report  func(kind deleteKind, msg string) // a violation, with details
	logf    func(format string, args ...any)
}

func newWorker(ns string, id int, c client.Client, seed uint64, n *counts, report func(deleteKind, string), logf func(string, ...any)) *worker {
	w := &worker{id: id, ns: ns, c: c, rng: rand.New(rand.NewPCG(seed, uint64(id))), n: n, report: report, logf: logf}
	for i := range stacksPerClient {
		w.targets = append(w.targets, &target{gvk: stackGVK, name: fmt.Sprintf("stack-%d", i), lastKind: kindNone})
	}
	for i := range pgsPerClient {
		owner := w.targets[i]
		t := &target{gvk: pgGVK, name: fmt.Sprintf("db-%d", i), owner: owner, lastKind: kindNone}
		owner.children = append(owner.children, t)
		w.targets = append(w.targets, t)
	}
	return w
}

func (w *worker) object(t *target, gvk schema.GroupVersionKind) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(w.ns)
	u.SetName(t.name)
	return u
}

// locksOn returns the worker's Locks on t in state s.
func (w *worker) locksOn(t *target, s lockState) []*lockRec {
	var out []*lockRec
	for _, l := range w.locks {
		if l.target == t && l.state == s && !l.invalid {
			out = append(out, l)
		}
	}
	return out
}

// run works until ctx ends.
func (w *worker) run(ctx context.Context) {
	for ctx.Err() == nil {
		w.step(ctx)
	}
}

func (w *worker) step(ctx context.Context) {
	if !w.resolve(ctx) {
		time.Sleep(100 * time.Millisecond) // The API server is away.
		return
	}
	switch r := w.rng.Float64(); {
	case r < 0.10:
		w.ensureTargets(ctx)
	case r < 0.25:
		w.createLock(ctx)
	case r < 0.30:
		w.lockThenDelete(ctx)
	case r < 0.45:
		w.deleteLock(ctx)
	case r < 0.88:
		w.deleteTarget(ctx)
	case r < 0.92:
		w.deleteCollection(ctx)
	case r < 0.95:
		w.cascade(ctx)
	default:
		w.editAnnotation(ctx)
	}
}

// resolve settles the Locks whose create or delete had an unknown
// outcome, by reading them. It returns false when the API server does not
// answer.
func (w *worker) resolve(ctx context.Context) bool { return w.resolveErr(ctx) == nil }

// resolveErr is resolve, with the API server's error.
func (w *worker) resolveErr(ctx context.Context) error {
	kept := w.locks[:0]
	for i, l := range w.locks {
		if l.state == creating || l.state == deleting {
			err := w.c.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: l.name}, &lockv1alpha1.Lock{})
			switch {
			case err == nil && l.state == creating:
				l.state, l.acked = live, time.Now()
				w.observe(ctx, l.target)
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
	var uid, ownerRef types.UID
	var annotated []string
	switch {
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
		return ownerRead == 1 && probe.undisturbed(l.acked)
	}
	for _, l := range w.locksOn(t, live) {
		if l.seenUID != "" && l.seenUID != uid {
			now := "is gone"
			if uid != "" {
				now = "was replaced by uid " + string(uid)
			}
			w.violation(t.lastKind, "%s %s (uid %s) %s while Lock %s protected it (created and seen %s ago, seen the object after that); the last request that could have removed it: %s",
				t.gvk.Kind, w.ns+"/"+t.name, l.seenUID, now, l.name, time.Since(l.acked).Round(time.Millisecond), t.lastKind)
			for _, other := range w.locksOn(t, live) {
				other.forget() // Counted once.
			}
		}
		if l.seenUID == "" && l.sawUID != "" && l.sawUID != uid {
			w.n.lateDeletes.Add(1)
			w.logf("%s %s (uid %s), seen after Lock %s's create was answered but before the Lock protected it, is gone: the last request that could have removed it: %s",
				t.gvk.Kind, w.ns+"/"+t.name, l.sawUID, l.name, t.lastKind)
		}
		l.sawUID = uid
		if l.seenUID == "" && uid != "" && protects(l) {
			l.seenUID = uid
		}
	}
	t.uid, t.ownerRef = uid, ownerRef
	return true
}

func (w *worker) violation(kind deleteKind, format string, args ...any) {
	w.n.byKind[kind].violations.Add(1)
	w.report(kind, fmt.Sprintf(format, args...))
}

// sending records that a request of kind that could remove t is about to
// be sent: a real delete of an owner may also make the garbage collector
// delete its children.
func (w *worker) sending(t *target, kind deleteKind) {
	t.lastKind = kind
	if !kinds[kind].dryRun {
		for _, c := range t.children {
			c.lastKind = kindCascade
		}
	}
}

// ensureTargets creates the targets that do not exist; a PostgresCluster
// is owned by its Stack when that exists, so that deleting the Stack
// cascades to it.
func (w *worker) ensureTargets(ctx context.Context) {
	for _, t := range w.targets {
		if !w.observe(ctx, t) || t.uid != "" {
			continue
		}
		u := w.object(t, t.gvk)
		u.Object["spec"] = map[string]any{"size": int64(1)}
		if t.owner != nil && t.owner.uid != "" {
			u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: stackGVK.GroupVersion().String(), Kind: "Stack", Name: t.owner.name, UID: t.owner.uid}})
		}
		if err := w.c.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
			continue
		}
		w.observe(ctx, t)
		t.unlockedSince = time.Time{}
	}
}

// createLock creates a Lock on a random target (at most two per target),
// through either served version of its apiVersion; one in ten targets
// another group and never protects anything.
func (w *worker) createLock(ctx context.Context) {
	t := w.targets[w.rng.IntN(len(w.targets))]
	if len(w.locksOn(t, live)) >= 2 {
		return
	}
	w.seq++
	l := &lockRec{name: fmt.Sprintf("lock-%d", w.seq), target: t, state: creating}
	ref := lockv1alpha1.TargetReference{Kind: t.gvk.Kind, Name: t.name}
	switch r := w.rng.IntN(10); {
	case r == 0:
		ref.APIVersion, l.invalid = "apps/v1", true
	case r < 4:
		ref.APIVersion = lockv1alpha1.Group + "/v1beta1"
	}
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
		Spec:       lockv1alpha1.LockSpec{TargetRef: ref, Reason: "chaos"},
	}
	w.locks = append(w.locks, l)
	w.n.lockCreates.Add(1)
	if err := w.c.Create(ctx, lock); err != nil {
		return // Unknown: resolve reads it.
	}
	l.state, l.acked = live, time.Now()
	if !l.invalid {
		t.unlockedSince = time.Time{}
		w.observe(ctx, t)
	}
}

// lockThenDelete locks an existing, unlocked target and sends its delete
// the moment the Lock's create is answered, without another request in
// between: the delete must be denied even though lockguard's caches may
// not have seen the Lock yet.
func (w *worker) lockThenDelete(ctx context.Context) {
	t := w.targets[w.rng.IntN(len(w.targets))]
	if locks, known := w.classify(t); len(locks) > 0 || !known {
		return
	}
	if !w.observe(ctx, t) || (t.owner != nil && !w.observe(ctx, t.owner)) || t.uid == "" {
		return
	}
	undisturbed := t.undisturbed(time.Now())
	w.seq++
	l := &lockRec{name: fmt.Sprintf("lock-%d", w.seq), target: t, state: creating}
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: t.gvk.Kind, Name: t.name}},
	}
	w.locks = append(w.locks, l)
	w.n.lockCreates.Add(1)
	if err := w.c.Create(ctx, lock); err != nil {
		return
	}
	l.state, l.acked = live, time.Now()
	if undisturbed {
		// No delete admitted before the Lock can be under way for the
		// object the client read just before creating it: from now on it
		// must stay, even if the delete's answer is lost (an error),
		// which observe below then catches.
		l.seenUID = t.uid
	}
	t.unlockedSince = time.Time{}
	uid := t.uid
	w.n.byKind[kindRaced].sent.Add(1)
	w.sending(t, kindRaced)
	sent := time.Now()
	err := w.c.Delete(ctx, w.object(t, t.gvk), client.Preconditions{UID: &uid})
	w.judge(ctx, t, []*lockRec{l}, kindRaced, sent, err)
	w.observe(ctx, t)
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
	if !l.invalid && !w.observe(ctx, l.target) {
		return
	}
	l.state = deleting
	w.n.lockDeletes.Add(1)
	err := w.c.Delete(ctx, &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name}})
	if err == nil || apierrors.IsNotFound(err) {
		l.state = gone
	}
}

// classify returns the target's live Locks, and whether the worker knows
// them all (no create or delete of a Lock on it has an unknown outcome).
func (w *worker) classify(t *target) ([]*lockRec, bool) {
	return w.locksOn(t, live), len(w.locksOn(t, creating)) == 0 && len(w.locksOn(t, deleting)) == 0
}

// pick returns a target to delete: one whose unlocked delete is pending,
// half of the time, else any.
func (w *worker) pick() *target {
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
	k := &w.n.byKind[kind]
	dryRun := kinds[kind].dryRun
	locked := len(locks) > 0
	if locked {
		k.locked.Add(1)
	} else {
		w.n.unlockedTries.Add(1)
	}
	switch {
	case err == nil && locked:
		k.allowed.Add(1)
		w.violation(kind, "a %s of %s %s was allowed while Locks %v protected it", kind, t.gvk.Kind, w.ns+"/"+t.name, seen(locks, sent))
		if !dryRun {
			for _, l := range locks {
				l.forget() // Counted once.
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
		if locked {
			k.denied.Add(1)
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
		if !locked {
			w.pending(t, dryRun)
			if !dryRun {
				t.doubt()
			}
		}
	}
}

// seen names the Locks and how long before sent the client saw each.
func seen(locks []*lockRec, sent time.Time) []string {
	names := make([]string, 0, len(locks))
	for _, l := range locks {
		names = append(names, fmt.Sprintf("%s (seen %s before)", l.name, sent.Sub(l.acked).Round(time.Millisecond)))
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
	if len(locked) > 0 {
		k.locked.Add(1)
	} else {
		w.n.unlockedTries.Add(1)
	}
	k.sent.Add(1)
	sent := time.Now()
	err := w.c.DeleteAllOf(ctx, w.object(&target{name: ""}, gvk), opts...)
	switch {
	case err == nil && len(locked) > 0:
		k.allowed.Add(1)
		for _, m := range locked {
			w.violation(kind, "a %s of %s in %s was allowed while Locks %v protected %s (uid %s)", kind, gvk.Kind, w.ns, seen(m.locks, sent), m.t.name, m.uid)
			for _, l := range m.locks {
				l.forget() // Counted once.
			}
		}
	case err == nil:
		w.n.unlockedOK.Add(1)
	case isDenial(err):
		if len(locked) > 0 {
			k.denied.Add(1)
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
		w.n.byKind[kindDelete].sent.Add(1)
		w.sending(t, kindDelete)
		sent := time.Now()
		err := w.c.Delete(ctx, w.object(t, t.gvk), client.Preconditions{UID: &t.uid})
		w.judge(ctx, t, nil, kindDelete, sent, err)
		if !t.unlockedSince.IsZero() {
			left = append(left, fmt.Sprintf("%s %s/%s (waiting %s, last error %v)", t.gvk.Kind, w.ns, t.name, time.Since(t.unlockedSince).Round(time.Second), err))
		}
	}
	return left, nil
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

// violations collects the details of every violation.
type violations struct {
	mu   sync.Mutex
	list []string
}

func (v *violations) add(kind deleteKind, msg string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.list = append(v.list, fmt.Sprintf("%s [%s] %s", time.Now().Format("15:04:05.000"), kind, msg))
}

func (v *violations) all() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.list)
}
