package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// cascadeGuard decides the cascades that the walker walks (cascade.go).
type cascadeGuard struct {
	cascadeWalker
	// listed walks the cascades the graph cannot (it has not synced);
	// nil: they are allowed with a warning.
	listed *listedWalks
	// labels is the graph's, when it keeps only the labels selector Locks
	// read; nil: it keeps all.
	labels  LabelKeeper
	mode    CascadeMode
	locks   *lockReader // the handler's
	metrics *Metrics    // the handler's
}

// newCascadeGuard returns the cascade guard of c (Mode "" is Deny), which
// reads locks and counts in metrics; nil for Mode Off or a nil Graph:
// cascades are not walked.
func newCascadeGuard(c CascadeConfig, locks *lockReader, metrics *Metrics) *cascadeGuard {
	if c.Graph == nil || c.Mode == CascadeOff {
		return nil
	}
	labels, _ := c.Graph.(LabelKeeper)
	return &cascadeGuard{cascadeWalker: newCascadeWalker(c.Graph, c.Limits), listed: newListedWalks(c), labels: labels, mode: c.Mode, locks: locks, metrics: metrics}
}

// lockedDependent is an object of the cascade that live Locks protect.
type lockedDependent struct {
	name  string // Kind/name
	locks []lockv1alpha1.Lock
}

// decide answers the DELETE of a named core.navique.com object that Locks
// can protect (never a Lock: deleting a Lock is never blocked), once the
// object guard has allowed it: it walks the cascade of req and has an
// answer when the cascade reaches a locked object (a denial, or an
// allowed delete with a warning) or could not be walked to the end (a
// warning). Otherwise the object guard's answer stands.
func (g *cascadeGuard) decide(ctx context.Context, req Request, _ string) (decision, bool) {
	target := req.Target()
	uid := req.OldObject.Metadata.UID
	if target.Namespace == "" || target.Name == "" || uid == "" || lockv1alpha1.Protectable(target.GroupKind()) != nil {
		return decision{}, false
	}
	if g.locks != nil && g.locks.nothingIn(target.Namespace) {
		// No Lock covers anything of the namespace, nor may (the index
		// lacks none there): no cascade of it reaches a locked object,
		// so there is nothing to walk, nor to warn of.
		return decision{}, false
	}
	ctx, cancel := guardContext(ctx)
	defer cancel()
	return g.decideCascade(ctx, req, target, uid)
}

// decideCascade walks the cascade of req, the DELETE of target (UID uid),
// and returns the answer when the cascade guard has one (decided true): a
// denial (holding the Locks that deny it), an allowed delete with a
// warning, or, when only Locks in Audit enforcement would deny it, an
// allowed delete with what they would refuse (decision.refusal,
// docs/contract.md rule 20).
func (g *cascadeGuard) decideCascade(ctx context.Context, req Request, target lockv1alpha1.TargetKey, uid types.UID) (d decision, decided bool) {
	d = decision{guard: GuardCascade}
	policy := rootPolicy(req)
	walked := policy
	if policy == metav1.DeletePropagationOrphan {
		// Nothing is deleted; walk as background to name the locked
		// dependents the orphaning leaves.
		walked = metav1.DeletePropagationBackground
	}
	// Asked before the walk reads the graph's objects (labelsKept).
	var kept labelsAt
	if g.labels != nil {
		kept.gen, kept.complete = g.labels.LabelGeneration(target.Namespace)
	}
	c := g.walk(ctx, target.Namespace, uid, walked)
	listed := false
	if c.incomplete == IncompleteUnsynced && g.listed != nil {
		// The graph cannot tell yet: walk the namespace as the API server
		// lists it, within the slots, which the decision holds until it
		// answers (the locked dependents are the listed objects).
		err := g.listed.slots.enter(ctx)
		if err == nil {
			defer g.listed.slots.leave()
			g.locks.confirmed(ReasonOwners)
			var graph *listedGraph
			if graph, err = g.listed.list(ctx, target.Namespace, g.limits.MaxListed); err == nil {
				c, listed = cascadeWalker{graph: graph, limits: g.limits}.walk(ctx, target.Namespace, uid, walked), true
			}
		}
		if err != nil {
			return g.unread(ctx, policy, target, "the dependents", "its owner index has not synced yet", "retry when lockguard is ready", err)
		}
	}
	// Asked before the Lock index, as the Freshness is: whether the index
	// may lack a Lock of the dependents, whose labels the graph may then
	// not have kept.
	objs, named := protectable(target.Namespace, c.deleted)
	_, lags := g.locks.mayLack(objs)
	locked, err := g.lockedIn(ctx, target.Namespace, objs, named)
	if err == nil && !listed && len(objs) > 0 && g.labels != nil && g.listed != nil && !g.labelsKept(ctx, target.Namespace, kept, lags) {
		// A selector Lock may read a label the graph has not kept yet
		// (readmodel.LabelKeys): the dependents' labels as the API
		// server lists them.
		var relabelled []*member
		if relabelled, err = g.relabel(ctx, target.Namespace, c.deleted); err != nil {
			return g.unread(ctx, policy, target, "the labels of the dependents", "its cache is refreshing the labels that selector Locks read", "retry", err)
		}
		c.deleted = relabelled
		objs, named = protectable(target.Namespace, c.deleted)
		locked, err = g.lockedIn(ctx, target.Namespace, objs, named)
	}
	if err != nil {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify the Locks on the dependents of %s %s/%s, so the delete is refused; retry when lockguard is ready: %w",
			target.GroupKind(), target.Namespace, target.Name, err))
		return d, true
	}
	g.metrics.cascadeIncomplete(c.incomplete)
	// An audit Lock refuses nothing (Lock.Enforces), not even a cascade:
	// it only says what it would refuse.
	enforced := protectedBy(locked, enforces)
	locks := locksOf(enforced)
	switch {
	case len(enforced) > 0 && policy == metav1.DeletePropagationOrphan:
		d.resp = admission.Allowed("").WithWarnings(fmt.Sprintf(
			"the dependents of this resource are orphaned, not deleted; locked dependents that stay: %s (Lock(s) %v)",
			dependentNames(enforced), lockNames(locks, false, 0)))
	case len(enforced) > 0 && g.mode == CascadeWarn:
		d.resp = admission.Allowed("").WithWarnings(CascadeWarning(locks, dependentList(enforced)))
	case len(locked) > 0 && policy != metav1.DeletePropagationOrphan && g.mode != CascadeWarn:
		// Denied by the Locks that enforce, naming the dependents they
		// protect; with none, allowed with what the audit Locks would
		// refuse.
		d = d.refusal(locksOf(locked), func(ls []lockv1alpha1.Lock) string {
			names := make(map[string]bool, len(ls))
			for _, l := range ls {
				names[l.Name] = true
			}
			return CascadeDenialMessage(ls, dependentList(protectedBy(locked, func(l lockv1alpha1.Lock) bool { return names[l.Name] })))
		})
	case c.incomplete != "" && policy != metav1.DeletePropagationOrphan:
		d.resp = admission.Allowed("").WithWarnings(fmt.Sprintf(
			"lockguard could not check all of this delete's cascade (%s): if the garbage collector reaches a locked resource, its delete is denied and the cascade stops there", c.detail))
	default:
		return d, false
	}
	return d, true
}

// unread is the cascade guard's answer when it could not read what of
// target's cascade (why: why the graph could not answer) from the API
// server: none (the object guard's answer stands) when nothing is
// deleted (policy Orphan) or nothing in the namespace is locked (a
// cascade deletes only objects of the owner's namespace), else a refusal.
func (g *cascadeGuard) unread(ctx context.Context, policy metav1.DeletionPropagation, target lockv1alpha1.TargetKey, what, why, retry string, err error) (decision, bool) {
	d := decision{guard: GuardCascade}
	if policy == metav1.DeletePropagationOrphan || g.noLocksIn(ctx, target.Namespace) {
		return d, false
	}
	d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not read %s of %s %s/%s from the API server (%s), so the delete is refused; %s: %w",
		what, target.GroupKind(), target.Namespace, target.Name, why, retry, err))
	return d, true
}

// protectable returns the objects of deleted (of namespace ns) that Locks
// can protect, as the guards name them, their labels as the graph holds
// them, and their members.
func protectable(ns string, deleted []*member) ([]lockv1alpha1.Object, []*member) {
	var objs []lockv1alpha1.Object
	var named []*member
	for _, m := range deleted {
		if lockv1alpha1.Protectable(m.gk) == nil {
			objs = append(objs, lockv1alpha1.Object{Namespace: ns, Group: m.gk.Group, Kind: m.gk.Kind, Name: m.meta.GetName(), Labels: m.meta.GetLabels()})
			named = append(named, m)
		}
	}
	return objs, named
}

// lockedIn returns the objects objs (protectable's, of the members named,
// in namespace ns) that live Locks protect (or, in Audit enforcement,
// would), as the handler's reader finds them (a cache that lags must not
// let a cascade through that the API server's Locks would deny).
func (g *cascadeGuard) lockedIn(ctx context.Context, ns string, objs []lockv1alpha1.Object, named []*member) ([]lockedDependent, error) {
	// The labels are the graph's: of the metadata cache, those selector
	// Locks read (decideCascade makes sure of it).
	if len(objs) == 0 {
		return nil, nil
	}
	found, err := g.locks.covering(ctx, ns, objs)
	if err != nil {
		return nil, err
	}
	var locked []lockedDependent
	for i, ls := range found {
		if len(ls) > 0 {
			locked = append(locked, lockedDependent{name: named[i].gk.Kind + "/" + named[i].meta.GetName(), locks: ls})
		}
	}
	return locked, nil
}

// protectedBy returns the dependents of locked that a Lock keep accepts
// protects, each with only those Locks.
func protectedBy(locked []lockedDependent, keep func(lockv1alpha1.Lock) bool) []lockedDependent {
	var out []lockedDependent
	for _, d := range locked {
		var ls []lockv1alpha1.Lock
		for _, l := range d.locks {
			if keep(l) {
				ls = append(ls, l)
			}
		}
		if len(ls) > 0 {
			out = append(out, lockedDependent{name: d.name, locks: ls})
		}
	}
	return out
}

// locksOf returns the Locks of locked, each once, sorted by name.
func locksOf(locked []lockedDependent) []lockv1alpha1.Lock {
	var all []lockv1alpha1.Lock
	seen := map[string]bool{}
	for _, d := range locked {
		for _, l := range d.locks {
			if !seen[l.Name] {
				seen[l.Name] = true
				all = append(all, l)
			}
		}
	}
	return sortedByName(all)
}

// dependentList returns the Kind/name of each of locked, sorted.
func dependentList(locked []lockedDependent) []string {
	names := make([]string, 0, len(locked))
	for _, d := range locked {
		names = append(names, d.name)
	}
	slices.Sort(names)
	return names
}

// dependentNames is dependentList joined with ", ", at most maxNamed of
// them, then how many more.
func dependentNames(locked []lockedDependent) string {
	return capJoin(dependentList(locked))
}

// CascadeDenialMessage is the message of a delete denied because its
// cascade would delete dependents (Kind/name, sorted) that locks protect:
// the contract's sentence naming the Locks (sorted; at most maxNamed, then
// how many more), both ways out, and the locked dependents (at most
// maxNamed, then how many more).
func CascadeDenialMessage(locks []lockv1alpha1.Lock, dependents []string) string {
	return fmt.Sprintf("resource would cascade-delete resources protected by Lock(s) %v; "+
		"delete the Lock(s) first, or delete this resource with --cascade=orphan (propagationPolicy Orphan) to keep its dependents "+
		"(locked dependents: %s)", lockNames(locks, false, 0), capJoin(dependents))
}

// CascadeWarning is the warning of a delete the cascade guard, in mode
// Warn, lets through although its cascade would delete dependents that
// locks protect.
func CascadeWarning(locks []lockv1alpha1.Lock, dependents []string) string {
	return fmt.Sprintf("this delete would cascade-delete resources protected by Lock(s) %v (locked dependents: %s): "+
		"the garbage collector's delete of each is denied, so the cascade stops there", lockNames(locks, false, 0), capJoin(dependents))
}

// noLocksIn reports whether the API server holds no live Lock, of any
// enforcement, in namespace ns: then no cascade of an owner of ns can
// delete a locked object, whatever its dependents, and an owner's delete
// need not wait for a walk the API server could not list. An error, or no
// reader of the API server, reports false (the delete is refused).
func (g *cascadeGuard) noLocksIn(ctx context.Context, ns string) bool {
	if g.locks == nil || g.locks.api == nil {
		return false
	}
	live, err := g.locks.api.namespace(ctx, ns)
	return err == nil && len(live) == 0
}
