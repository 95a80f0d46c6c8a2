//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ClusterLocks in the mix (docs/contract.md rule 22, docs/clusterlock.md;
// issue 40).
//
// The clusterWorker works on clusterNamespaces Namespaces of its own
// (prefix-0, ...), each labelled clusterNSLabel with its own name: it
// creates them, creates ClusterLocks on some (by name, apiVersion v1 kind
// Namespace, or, one time in two, by a selector of kind Namespace on that
// label, which matches that namespace alone; one in three ReadOnly, so
// that the create also puts the read-only label on), deletes locked and unlocked
// namespaces (a third of the time as dry runs, and the moment a
// ClusterLock's create is answered), and deletes ClusterLocks. The checker
// judges each namespace delete by its answer, not by the namespace's
// disappearance (a namespace takes time to terminate): a delete sent while
// a ClusterLock the client saw created (its create answered, its delete
// not yet sent) named the namespace must be refused; one sent while none
// did must go through, in time (a refusal by a ClusterLock just deleted is
// counted, and retried until the faults stop, then until it goes through:
// settle). And as for the workers' objects (observe), a namespace the
// client saw after its ClusterLock's create must not start terminating
// while that ClusterLock lives.
type clusterWorker struct {
	prefix string
	c      client.Client
	rng    *rand.Rand
	n      *counts
	cl     clusterCounts
	report func(kind deleteKind, msg string)
	logf   func(format string, args ...any)
	seq    int
	logged int // errors logged (the first few)
	nss    []*clusterNS
	locks  []*clusterLockRec
}

// clusterNamespaces is how many namespaces the clusterWorker works on.
const clusterNamespaces = 4

// clusterNSLabel is the label of the clusterWorker's namespaces, whose
// value is the namespace's name: what a selector ClusterLock matches.
const clusterNSLabel = "chaos.navique.com/cluster-ns"

// clusterCounts are what the clusterWorker counts besides the kinds' rows.
type clusterCounts struct {
	nsCreates, lockCreates, lockDeletes atomic.Int64
	// selectorLocks and readOnlyLocks are the creates by selector and of
	// level ReadOnly among lockCreates.
	selectorLocks, readOnlyLocks atomic.Int64
	// lockCreateErrors are the creates among lockCreates that got an
	// error (their outcome unknown until resolve reads it): a run whose
	// ClusterLock rows lock nothing says here whether its creates failed.
	lockCreateErrors atomic.Int64
}

// clusterNS is one of the clusterWorker's namespaces.
type clusterNS struct {
	name string
	// uid is the namespace's as last read; empty when absent or
	// terminating.
	uid types.UID
	// doubtSince is when a real delete of it was last answered with an
	// error that does not say whether it happened.
	doubtSince time.Time
	// unlockedSince is when a delete of it, unlocked, was first refused;
	// zero when none is pending.
	unlockedSince time.Time
	lastKind      deleteKind
}

// clusterLockRec is a ClusterLock the clusterWorker created.
type clusterLockRec struct {
	name string
	// how is what the ClusterLock is, for a violation's message: "by
	// name" or "by selector", and ", ReadOnly".
	how   string
	ns    *clusterNS
	state lockState
	acked time.Time
	// seenUID is the namespace the client saw after acked, with no delete
	// of its own in flight: it must not terminate while the lock lives.
	seenUID types.UID
}

func newClusterWorker(prefix string, c client.Client, seed uint64, n *counts, report func(deleteKind, string), logf func(string, ...any)) *clusterWorker {
	w := &clusterWorker{prefix: prefix, c: c, rng: rand.New(rand.NewPCG(seed, 0xc1)), n: n, report: report, logf: logf}
	for i := range clusterNamespaces {
		w.nss = append(w.nss, &clusterNS{name: fmt.Sprintf("%s-%d", prefix, i), lastKind: kindNone})
	}
	return w
}

func (w *clusterWorker) violation(kind deleteKind, format string, args ...any) {
	w.n.byKind[kind].violations.Add(1)
	w.report(kind, fmt.Sprintf(format, args...))
}

// run works until ctx ends.
func (w *clusterWorker) run(ctx context.Context) {
	for ctx.Err() == nil {
		if !w.resolve(ctx) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		ns := w.nss[w.rng.IntN(len(w.nss))]
		switch r := w.rng.Float64(); {
		case r < 0.15:
			w.ensure(ctx)
		case r < 0.35:
			w.lock(ctx, ns, false)
		case r < 0.50:
			w.lock(ctx, ns, true)
		case r < 0.65:
			w.unlock(ctx)
		default:
			w.deleteNamespace(ctx, w.deleteTarget(ns), w.rng.IntN(3) == 0, kindCLNamespace)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// deleteTarget returns the namespace a delete goes to: one time in two a
// locked one when there is one, else ns. Picked at random alone, the
// locked ones were too rare in a short run on a loaded machine (9ba3fbe's
// run: 19 namespace deletes and 8 dry runs, none while locked): a real
// delete of an unlocked namespace leaves it terminating for seconds, and
// a ClusterLock is only created on a namespace that exists.
func (w *clusterWorker) deleteTarget(ns *clusterNS) *clusterNS {
	if w.rng.IntN(2) == 0 {
		return ns
	}
	var locked []*clusterNS
	for _, l := range w.locks {
		if l.state == live && !slices.Contains(locked, l.ns) {
			locked = append(locked, l.ns)
		}
	}
	if len(locked) == 0 {
		return ns
	}
	return locked[w.rng.IntN(len(locked))]
}

// resolve settles the ClusterLocks whose create or delete had an unknown
// outcome, by reading them; false when the API server does not answer.
func (w *clusterWorker) resolve(ctx context.Context) bool {
	for _, l := range w.locks {
		if l.state != creating && l.state != deleting {
			continue
		}
		err := w.c.Get(ctx, client.ObjectKey{Name: l.name}, &lockv1alpha1.ClusterLock{})
		switch {
		case err == nil && l.state == creating:
			l.state, l.acked = live, time.Now()
			if !w.observe(ctx, l.ns) {
				return false
			}
		case err == nil:
			l.state = live
		case apierrors.IsNotFound(err):
			l.state = gone
		default:
			return false
		}
	}
	w.locks = slices.DeleteFunc(w.locks, func(l *clusterLockRec) bool { return l.state == gone })
	return true
}

// locksOn returns the ClusterLocks in state s that name ns.
func (w *clusterWorker) locksOn(ns *clusterNS, s lockState) []*clusterLockRec {
	var out []*clusterLockRec
	for _, l := range w.locks {
		if l.ns == ns && l.state == s {
			out = append(out, l)
		}
	}
	return out
}

// known reports whether no ClusterLock on ns has an unknown outcome.
func (w *clusterWorker) known(ns *clusterNS) bool {
	return len(w.locksOn(ns, creating)) == 0 && len(w.locksOn(ns, deleting)) == 0
}

// observe reads ns and checks the invariant: a namespace a live
// ClusterLock protected when the client saw it must not be terminating
// or gone, nor replaced. It returns false when the API server does not
// answer.
func (w *clusterWorker) observe(ctx context.Context, ns *clusterNS) bool {
	var o corev1.Namespace
	err := w.c.Get(ctx, client.ObjectKey{Name: ns.name}, &o)
	var uid types.UID
	switch {
	case err == nil && o.DeletionTimestamp == nil:
		uid = o.UID
	case err == nil || apierrors.IsNotFound(err):
	default:
		return false
	}
	now := time.Now()
	for _, l := range w.locksOn(ns, live) {
		if l.seenUID != "" && l.seenUID != uid {
			w.violation(ns.lastKind, "Namespace %s (uid %s) started terminating or went while ClusterLock %s named it (created and seen %s ago, seen the namespace after that); the last request that could have removed it: %s",
				ns.name, l.seenUID, l.name+" ("+l.how+")", now.Sub(l.acked).Round(time.Millisecond), ns.lastKind)
			for _, other := range w.locksOn(ns, live) {
				other.seenUID = "" // Counted once.
			}
		}
		if l.seenUID == "" && uid != "" && (ns.doubtSince.IsZero() || now.Sub(ns.doubtSince) > inFlightFor) {
			l.seenUID = uid
		}
	}
	ns.uid = uid
	return true
}

// ensure creates the namespaces that do not exist (a terminating one
// waits until it is gone).
func (w *clusterWorker) ensure(ctx context.Context) {
	for _, ns := range w.nss {
		if !w.observe(ctx, ns) || ns.uid != "" {
			continue
		}
		if err := w.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name, Labels: map[string]string{clusterNSLabel: ns.name}}}); err == nil {
			w.cl.nsCreates.Add(1)
			ns.unlockedSince = time.Time{}
		}
		w.observe(ctx, ns)
	}
}

// lock creates a ClusterLock on ns (at most two), when ns exists and no
// delete of it may be in flight; with raced, when ns is unlocked, and
// then deletes ns the moment the create is answered.
func (w *clusterWorker) lock(ctx context.Context, ns *clusterNS, raced bool) {
	if !w.known(ns) || (raced && len(w.locksOn(ns, live)) > 0) || len(w.locksOn(ns, live)) >= 2 {
		return
	}
	if !w.observe(ctx, ns) || ns.uid == "" || (!ns.doubtSince.IsZero() && time.Since(ns.doubtSince) < inFlightFor) {
		return
	}
	w.seq++
	l := &clusterLockRec{name: fmt.Sprintf("%s-%d", w.prefix, w.seq), ns: ns, state: creating}
	w.locks = append(w.locks, l)
	w.cl.lockCreates.Add(1)
	spec := lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: ns.name}, Reason: "chaos"}
	l.how = "by name"
	if w.rng.IntN(2) == 0 {
		l.how = "by selector"
		spec.TargetRef = lockv1alpha1.ClusterTargetReference{}
		spec.Selector = &lockv1alpha1.ClusterLockSelector{Kinds: []string{"Namespace"}, MatchLabels: map[string]string{clusterNSLabel: ns.name}}
		w.cl.selectorLocks.Add(1)
	}
	if w.rng.IntN(3) == 0 {
		spec.Level = lockv1alpha1.LevelReadOnly
		l.how += ", ReadOnly"
		w.cl.readOnlyLocks.Add(1)
	}
	err := w.c.Create(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: l.name}, Spec: spec})
	if err != nil {
		w.cl.lockCreateErrors.Add(1)
		if w.logged < 5 {
			w.logged++
			w.logf("%s: the create of ClusterLock %s (%s) on Namespace %s failed: %v", w.prefix, l.name, l.how, ns.name, err)
		}
		return // Unknown: resolve reads it.
	}
	// No delete of the client's can be in flight for the namespace it read
	// just before: from the create's answer on, it must stay.
	l.state, l.acked, l.seenUID = live, time.Now(), ns.uid
	ns.unlockedSince = time.Time{}
	switch {
	case raced:
		w.deleteNamespace(ctx, ns, false, kindCLRaced)
	case w.rng.IntN(2) == 0:
		// A dry-run delete of the namespace it has just locked: also what
		// makes the checker's self-test see this kind within seconds (a
		// dry run of a locked namespace is otherwise rare there, where the
		// real deletes go through and the namespaces terminate).
		w.deleteNamespace(ctx, ns, true, kindCLNamespace)
	default:
		w.observe(ctx, ns)
	}
}

// unlock deletes a random live ClusterLock, after a look at its namespace.
func (w *clusterWorker) unlock(ctx context.Context) {
	var live_ []*clusterLockRec
	for _, l := range w.locks {
		if l.state == live {
			live_ = append(live_, l)
		}
	}
	if len(live_) == 0 {
		return
	}
	l := live_[w.rng.IntN(len(live_))]
	if !w.observe(ctx, l.ns) {
		return
	}
	l.state = deleting
	w.cl.lockDeletes.Add(1)
	if err := w.c.Delete(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: l.name}}); err == nil || apierrors.IsNotFound(err) {
		l.state = gone
	}
}

// deleteNamespace deletes ns (dryRun: as a dry run) and judges the
// answer, counted as kind (kindCLNamespace or kindCLRaced; a dry run
// counts as kindCLDryRun).
func (w *clusterWorker) deleteNamespace(ctx context.Context, ns *clusterNS, dryRun bool, kind deleteKind) {
	if !w.known(ns) || !w.observe(ctx, ns) || ns.uid == "" {
		return
	}
	if dryRun {
		kind = kindCLDryRun
	}
	locks := w.locksOn(ns, live)
	k := &w.n.byKind[kind]
	k.sent.Add(1)
	ns.lastKind = kind
	opts := []client.DeleteOption{client.Preconditions{UID: &ns.uid}}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	if len(locks) > 0 {
		k.locked.Add(1)
	} else {
		w.n.unlockedTries.Add(1)
	}
	err := w.c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.name}}, opts...)
	switch {
	case err == nil && len(locks) > 0:
		k.allowed.Add(1)
		names := make([]string, 0, len(locks))
		for _, l := range locks {
			names = append(names, fmt.Sprintf("%s (%s, seen %s before)", l.name, l.how, time.Since(l.acked).Round(time.Millisecond)))
			l.seenUID = "" // Counted once.
		}
		w.violation(kind, "a %s of Namespace %s (uid %s) was allowed while ClusterLocks %v named it", kind, ns.name, ns.uid, names)
	case err == nil:
		w.n.unlockedOK.Add(1)
		if !dryRun {
			ns.uid, ns.unlockedSince = "", time.Time{}
		}
	case isGuardDenial(err, "cluster-lock"):
		if len(locks) > 0 {
			k.denied.Add(1)
		} else {
			w.n.staleDenials.Add(1)
			if !dryRun && ns.unlockedSince.IsZero() {
				ns.unlockedSince = time.Now()
			}
		}
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		w.observe(ctx, ns)
	default:
		k.errors.Add(1)
		if w.logged < 5 {
			w.logged++
			w.logf("%s: a %s of Namespace %s (%d ClusterLocks) failed: %v", w.prefix, kind, ns.name, len(locks), err)
		}
		if len(locks) == 0 && !dryRun {
			ns.doubtSince = time.Now()
			if ns.unlockedSince.IsZero() {
				ns.unlockedSince = time.Now()
			}
		}
	}
	if !dryRun {
		w.observe(ctx, ns)
	}
}

// settle retries the deletes of the unlocked namespaces still waiting for
// theirs until they go through or ctx ends, then deletes every
// ClusterLock of the worker (the self-test's cleanup and the namespaces'
// end). It returns what was still refused.
func (w *clusterWorker) settle(ctx context.Context) []string {
	for ctx.Err() == nil {
		if !w.resolve(ctx) {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		var left []string
		for _, ns := range w.nss {
			if ns.unlockedSince.IsZero() || len(w.locksOn(ns, live)) > 0 || !w.known(ns) {
				ns.unlockedSince = time.Time{}
				continue
			}
			w.deleteNamespace(ctx, ns, false, kindCLNamespace)
			if !ns.unlockedSince.IsZero() && ns.uid != "" {
				left = append(left, fmt.Sprintf("Namespace %s (waiting %s)", ns.name, time.Since(ns.unlockedSince).Round(time.Second)))
			} else {
				ns.unlockedSince = time.Time{}
			}
		}
		if len(left) == 0 {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
		if ctx.Err() != nil {
			return left
		}
	}
	return []string{w.prefix + ": the API server did not answer while settling"}
}

// cleanup deletes the worker's ClusterLocks and namespaces, without
// judging (the self-test's end).
func (w *clusterWorker) cleanup(ctx context.Context) []string {
	var names []string
	for i := 1; i <= w.seq; i++ {
		_ = w.c.Delete(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", w.prefix, i)}})
	}
	for _, ns := range w.nss {
		names = append(names, ns.name)
	}
	return names
}

// audit checks every namespace once more; false when the API server did
// not answer.
func (w *clusterWorker) audit(ctx context.Context) bool {
	if !w.resolve(ctx) {
		return false
	}
	for _, ns := range w.nss {
		if !w.observe(ctx, ns) {
			return false
		}
	}
	return true
}

// summary is the summary's line of the clusterWorker's own counts.
func (w *clusterWorker) summary() string {
	return fmt.Sprintf("chaos: ClusterLocks (rule 22): %d namespaces of the mix, created %d times; ClusterLocks on them created %d (%d by selector, %d ReadOnly; %d creates got an error), deleted %d (not counted in the Locks line above; their namespace deletes are the three ClusterLock rows above; a refusal of an unlocked one by a ClusterLock just deleted counts with the denials by a Lock already deleted below)",
		clusterNamespaces, w.cl.nsCreates.Load(), w.cl.lockCreates.Load(), w.cl.selectorLocks.Load(), w.cl.readOnlyLocks.Load(), w.cl.lockCreateErrors.Load(), w.cl.lockDeletes.Load())
}
