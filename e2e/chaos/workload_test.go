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
	"k8s.io/apimachinery/pkg/api/meta"
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

// updateDenialPrefix starts the API server's error for an update that
// lockguard refused under a ReadOnly Lock (docs/contract.md rule 16).
const updateDenialPrefix = `admission webhook "update.lockguard.core.navique.com" denied the request: resource is read-only under Lock(s) [`

// isUpdateDenial reports whether err is lockguard's refusal of an update.
func isUpdateDenial(err error) bool {
	return err != nil && apierrors.IsForbidden(err) && strings.HasPrefix(err.Error(), updateDenialPrefix)
}

// setLabel is the label the workload's selector Locks select on: each
// worker sets it on its own objects, to one of setValues or none, and
// moves objects in and out of its selectors by changing it.
const setLabel = "chaos.navique.com/set"

// setValues are the values of setLabel a selector Lock selects.
var setValues = []string{"a", "b"}

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
	// selectorLocks and readOnlyLocks count the Lock creates with a
	// selector, and with level ReadOnly.
	selectorLocks, readOnlyLocks atomic.Int64
	// relabels counts the changes of setLabel that went through (objects
	// moved in or out of selectors).
	relabels atomic.Int64
	// updateFree counts the updates (spec or label) of objects no ReadOnly
	// Lock of the client's froze, and updateStale those of them refused (by
	// a ReadOnly Lock already deleted or relabelled out of: a cache
	// catching up).
	updateFree, updateStale atomic.Int64
	// updatePending counts the updates of objects a ReadOnly Lock covered
	// that was not (seen) in force yet, or that did not carry the
	// read-only label yet; updatePendingDenied those of them refused. Both
	// answers are right.
	updatePending, updatePendingDenied atomic.Int64
	annotations                        atomic.Int64 // hand edits of the lock annotation
	slowestUnlock                      atomic.Int64 // longest time an unlocked target waited for its delete, ns
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
	name string
	// target is a targetRef Lock's target; nil for a selector Lock.
	target *target
	// sel is a selector Lock's selector; nil for a targetRef Lock.
	sel *selectorRec
	// readOnly: the Lock's level is ReadOnly (it never changes).
	readOnly bool
	state    lockState
	// acked is when the client saw the Lock exist (the create's answer).
	acked time.Time
	// seenUID is, for each object the Lock covers, the UID of the object
	// the client saw exist after acked, covered: from then on, until the
	// client deletes the Lock or moves the object out of its selector, that
	// object must exist.
	seenUID map[*target]types.UID
	// sawUID is, for each object the Lock covers, the UID of the object the
	// client first saw after acked, protected or not yet.
	sawUID  map[*target]types.UID
	invalid bool // targets another group: never protects
}

// newLockRec returns the record of a Lock about to be created.
func newLockRec(name string, t *target, sel *selectorRec, readOnly bool) *lockRec {
	return &lockRec{name: name, target: t, sel: sel, readOnly: readOnly, state: creating,
		seenUID: map[*target]types.UID{}, sawUID: map[*target]types.UID{}}
}

// forget drops what the Lock saw of t, once a violation on it is counted,
// or once t left its selector (or may have).
func (l *lockRec) forget(t *target) {
	delete(l.seenUID, t)
	delete(l.sawUID, t)
}

// covers reports whether the Lock covers t, as far as the client knows:
// its target, or an object whose setLabel its selector matches, when no
// change of that label with an unknown outcome may still be under way.
func (l *lockRec) covers(t *target) bool {
	switch {
	case l.invalid:
		return false
	case l.sel == nil:
		return l.target == t
	default:
		return t.labelDoubtSince.IsZero() && l.sel.matches(t)
	}
}

// selectorRec is a selector Lock's selector: the objects whose setLabel
// is value, of kinds (any kind when empty). It never covers the
// namespace (only the empty selector does, which the workload does not
// use: it would hold back the namespace-wide requests of the other
// workers' tests and the settling at the end).
type selectorRec struct {
	value string
	kinds []string
	// expression: the selector says it with matchExpressions (In) rather
	// than matchLabels.
	expression bool
}

func (s *selectorRec) matches(t *target) bool {
	return t.label == s.value && (len(s.kinds) == 0 || slices.Contains(s.kinds, t.gvk.Kind))
}

// spec returns the Lock's selector.
func (s *selectorRec) spec() *lockv1alpha1.LockSelector {
	out := &lockv1alpha1.LockSelector{Kinds: s.kinds}
	if s.expression {
		out.MatchExpressions = []lockv1alpha1.LabelSelectorRequirement{{Key: setLabel, Operator: lockv1alpha1.SelectorOpIn, Values: []string{s.value}}}
	} else {
		out.MatchLabels = map[string]string{setLabel: s.value}
	}
	return out
}

func (s *selectorRec) String() string {
	if len(s.kinds) > 0 {
		return fmt.Sprintf("%s=%s %v", setLabel, s.value, s.kinds)
	}
	return setLabel + "=" + s.value
}

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
	// label is the object's setLabel ("" for none), as the client set or
	// last read it; labelSince is when it took that value (the answer to
	// its create or relabel, or the read that found it).
	label      string
	labelSince time.Time
	// labelDoubtSince is when a create or relabel of the object was last
	// answered with an error that does not say whether it happened: until
	// a read more than inFlightFor later, its label is unknown and no
	// selector Lock is known to cover it. Zero when the label is known.
	labelDoubtSince time.Time
	// readOnlyLabel: the object carried lockguard's read-only label when
	// last read.
	readOnlyLabel bool
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

// doubtLabel records that a create or relabel of t was answered with an
// error that does not say whether it happened: which selector Locks cover
// it is unknown until a read more than inFlightFor later, and what they
// saw of it is dropped (an object that leaves a selector may go).
func (w *worker) doubtLabel(t *target) {
	t.labelDoubtSince = time.Now()
	for _, l := range w.locks {
		if l.sel != nil {
			l.forget(t)
		}
	}
}

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

// locksOn returns the worker's Locks in state s that cover t.
func (w *worker) locksOn(t *target, s lockState) []*lockRec {
	var out []*lockRec
	for _, l := range w.locks {
		if l.state == s && l.covers(t) {
			out = append(out, l)
		}
	}
	return out
}

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
	case r < 0.73:
		w.deleteTarget(ctx)
	case r < 0.77:
		w.deleteCollection(ctx)
	case r < 0.80:
		w.cascade(ctx)
	case r < 0.83:
		w.editAnnotation(ctx)
	case r < 0.88:
		w.update(ctx, false)
	default:
		w.update(ctx, true)
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

// describe names the Lock and what it covers, for a violation's message.
func (l *lockRec) describe() string {
	level := ""
	if l.readOnly {
		level = ", ReadOnly"
	}
	if l.sel != nil {
		return fmt.Sprintf("%s (selector %s%s)", l.name, l.sel, level)
	}
	return fmt.Sprintf("%s (targetRef%s)", l.name, level)
}

func labelText(label string) string {
	if label == "" {
		return "no " + setLabel
	}
	return setLabel + "=" + label
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
		// Created in a selector two times in three: a selector Lock covers
		// it from its create.
		label := ""
		if r := w.rng.IntN(3); r < len(setValues) {
			label = setValues[r]
			u.SetLabels(map[string]string{setLabel: label})
		}
		err := w.c.Create(ctx, u)
		switch {
		case err == nil:
			t.label, t.labelSince = label, time.Now()
		case apierrors.IsAlreadyExists(err):
			// Some create of the client's whose answer was lost made it:
			// the read below finds its label.
		default:
			w.doubtLabel(t)
			continue
		}
		w.observe(ctx, t)
		t.unlockedSince = time.Time{}
	}
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
	ref := lockv1alpha1.TargetReference{Kind: t.gvk.Kind, Name: t.name}
	switch r := w.rng.IntN(10); {
	case r == 0:
		ref.APIVersion, l.invalid = "apps/v1", true
	case r < 4:
		ref.APIVersion = lockv1alpha1.Group + "/v1beta1"
	}
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
		Spec:       lockv1alpha1.LockSpec{TargetRef: ref, Reason: "chaos", Level: l.level()},
	}
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
	if w.rng.IntN(4) == 0 {
		sel.kinds = []string{[]string{stackGVK.Kind, pgGVK.Kind}[w.rng.IntN(2)]}
	}
	if l := w.createSelectorLockOn(ctx, sel, readOnly); l.state == live {
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
func (w *worker) createSelectorLockOn(ctx context.Context, sel *selectorRec, readOnly bool) *lockRec {
	w.seq++
	l := newLockRec(fmt.Sprintf("sel-%d", w.seq), nil, sel, readOnly)
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
		Spec:       lockv1alpha1.LockSpec{Selector: sel.spec(), Reason: "chaos", Level: l.level()},
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
		if l = w.createSelectorLockOn(ctx, &selectorRec{value: t.label}, readOnly); l.state != live {
			return
		}
	} else {
		w.seq++
		l = newLockRec(fmt.Sprintf("lock-%d", w.seq), t, nil, readOnly)
		lock := &lockv1alpha1.Lock{
			ObjectMeta: metav1.ObjectMeta{Namespace: w.ns, Name: l.name},
			Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: t.gvk.Kind, Name: t.name}, Level: l.level()},
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
		countScope(k, locks, false)
	} else {
		w.n.unlockedTries.Add(1)
	}
	switch {
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
	var frozen []*lockRec
	inForce := false
	for _, l := range locks {
		if !l.readOnly {
			continue
		}
		frozen = append(frozen, l)
		ok, err := w.inForce(ctx, l)
		if err != nil {
			return
		}
		inForce = inForce || ok
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
	mustRefuse := inForce && labelled
	switch {
	case mustRefuse:
		k.locked.Add(1)
		countScope(k, frozen, false)
	case len(frozen) > 0:
		w.n.updatePending.Add(1)
	default:
		w.n.updateFree.Add(1)
	}
	sent := time.Now()
	err := w.c.Update(ctx, u, opts...)
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
