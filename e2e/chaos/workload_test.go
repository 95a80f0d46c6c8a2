//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
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

// setLabel is the label the workload's selector Locks select on: each
// worker sets it on its own objects, to one of setValues or none, and
// moves objects in and out of its selectors by changing it.
const setLabel = "chaos.navique.com/set"

// setValues are the values of setLabel a selector Lock selects.
var setValues = []string{"a", "b"}

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
	// expiringLocks and auditLocks count the Lock creates with an
	// expiresAt, and in Audit; expiredLocks the Locks the client saw
	// expire while live, expiredInFlight the requests a Lock protected
	// when sent that were answered after it expired (either answer is
	// right).
	expiringLocks, auditLocks, expiredLocks, expiredInFlight atomic.Int64
	// exceptions counts the LockException creates; exceptionUsed the
	// deletes a Lock protected that an exception let through, and
	// exceptionRefused those refused while such an exception lived that
	// did not owe them its passage (worker.owed: those are violations),
	// or that did while kube-apiserver was being restarted (apiDown).
	exceptions, exceptionUsed, exceptionRefused atomic.Int64
	// apiDown are the times the harness restarted kube-apiserver.
	apiDown restarts
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
	// audit: in Audit enforcement, it never protects; expires: when it
	// stops protecting (zero: never). See terms_test.go.
	audit   bool
	expires time.Time
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
	case l.invalid, l.audit:
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

// matches reports whether the selector covers t: without kinds, it covers
// the objects of core.navique.com only (docs/optin.md: a selector covers
// an opted-in kind only where its kinds names it).
func (s *selectorRec) matches(t *target) bool {
	if len(s.kinds) == 0 {
		return t.label == s.value && t.gvk.Group == lockv1alpha1.Group
	}
	return t.label == s.value && slices.Contains(s.kinds, t.gvk.Kind)
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
	// audits are the names of the worker's Audit Locks, gone ones too.
	audits map[string]bool
	// username is the client's user (worker.user); exceptions the
	// break-glass exceptions it created (exceptions_test.go).
	username   string
	exceptions []exceptionRec
	// optIn: the worker's targets are PersistentVolumeClaims, a kind of
	// another group opted in (optin_test.go).
	optIn  bool
	logged int                               // an opt-in worker's errors logged (the first few)
	report func(kind deleteKind, msg string) // a violation, with details
	logf   func(format string, args ...any)
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
	if w.optIn {
		w.stepOptIn(ctx)
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
	case r < 0.71:
		w.deleteTarget(ctx)
	case r < 0.73:
		w.breakGlass(ctx)
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

// describe names the Lock and what it covers, for a violation's message.
func (l *lockRec) describe() string {
	level := ""
	if l.readOnly {
		level = ", ReadOnly"
	}
	if !l.expires.IsZero() {
		level += ", expires " + l.expires.Format("15:04:05")
	}
	if l.audit {
		level += ", Audit"
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
		u.Object["spec"] = targetSpec(t)
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
