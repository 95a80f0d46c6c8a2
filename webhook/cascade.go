package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The cascade guard (LOCK-SPEC rule 6): the DELETE of an owner that the
// object guard allows is denied when the garbage collector would, as a
// result, delete a locked object, so that a cascade is all or nothing
// rather than stopped half-way at the locked object (whose own delete the
// object guard still denies). It walks ownerReferences down through the
// group's kinds, by UID, in the owner's namespace, with the collector's
// rules (dependentsDeleted), over metadata caches every replica keeps
// (OwnerGraph, in lockguard controller.OwnerIndex).

// GuardCascade names the cascade guard in metrics and audit annotations.
const GuardCascade = "cascade"

// CascadeMode is what the cascade guard does with a delete whose cascade
// would reach locked objects.
type CascadeMode string

// The cascade modes (the chart's guards.cascade, lockguard's
// --cascade-guard).
const (
	// CascadeDeny denies the delete (the default).
	CascadeDeny CascadeMode = "Deny"
	// CascadeWarn allows it with a warning naming the Locks.
	CascadeWarn CascadeMode = "Warn"
	// CascadeOff does not walk cascades at all.
	CascadeOff CascadeMode = "Off"
)

// ParseCascadeMode returns the mode s names (Deny, Warn or Off), or an
// error that lists them.
func ParseCascadeMode(s string) (CascadeMode, error) {
	switch m := CascadeMode(s); m {
	case CascadeDeny, CascadeWarn, CascadeOff:
		return m, nil
	}
	return "", fmt.Errorf("cascade guard mode %q is not one of Deny, Warn, Off", s)
}

// OwnerGraph is the ownership between the objects of the group's
// namespaced kinds, as metadata-only caches see them (in lockguard,
// controller.OwnerIndex). Its objects are shared: read-only.
type OwnerGraph interface {
	// Dependents calls fn with each object in namespace ns whose
	// ownerReferences name the UID owner, and its kind, until fn returns
	// false. It returns an error when it cannot tell (a kind's cache has
	// not synced).
	Dependents(ns string, owner types.UID, fn func(schema.GroupKind, *metav1.PartialObjectMetadata) bool) error
	// Owner returns the object ref names in namespace ns (nil when there
	// is none), whatever its UID; watched is false when the graph does not
	// hold ref's kind, and so cannot tell.
	Owner(ns string, ref metav1.OwnerReference) (o *metav1.PartialObjectMetadata, watched bool)
}

// CascadeLimits bound the walk of one cascade.
type CascadeLimits struct {
	// MaxDepth is the longest chain of owners followed. Default 64.
	MaxDepth int
	// MaxObjects is the most dependents looked at. Default 100,000.
	MaxObjects int
}

// WithCascadeGuard makes the handler walk the cascade of every DELETE of a
// core.navique.com object that the object guard allows, over graph, and
// deny (mode Deny) or warn about (Warn) one that would make the garbage
// collector delete a locked object. The Locks come from the handler's
// index, and, when it finds none and the handler confirms allowed
// deletes, from a list of the namespace's Locks read from the API server.
// Mode Off, or a nil graph, leaves cascades unchecked.
func WithCascadeGuard(graph OwnerGraph, mode CascadeMode, limits CascadeLimits) Option {
	return func(h *Handler) {
		if graph == nil || mode == CascadeOff {
			return
		}
		if limits.MaxDepth <= 0 {
			limits.MaxDepth = 64
		}
		if limits.MaxObjects <= 0 {
			limits.MaxObjects = 100_000
		}
		h.cascade = &cascadeGuard{graph: graph, mode: mode, limits: limits}
	}
}

// cascadeGuard walks cascades.
type cascadeGuard struct {
	graph  OwnerGraph
	mode   CascadeMode
	limits CascadeLimits
}

// Reasons a cascade walk did not finish, counted by
// lockguard_cascade_incomplete_total.
const (
	IncompleteDepth    = "depth"
	IncompleteObjects  = "objects"
	IncompleteUnsynced = "unsynced"
	IncompleteDeadline = "deadline"
)

// member is an object the cascade deletes: its kind, its metadata and how
// the collector deletes it.
type member struct {
	gk     schema.GroupKind
	meta   *metav1.PartialObjectMetadata
	policy metav1.DeletionPropagation
	depth  int
	via    types.UID // the owner through which the walk first reached it
}

// Dependent is an object a cascade deletes.
type Dependent struct {
	// Kind is its group and kind.
	Kind schema.GroupKind
	// Object is its metadata, as the graph holds it: read-only.
	Object *metav1.PartialObjectMetadata
	// Owner is the UID of the owner through which the cascade reached it.
	Owner types.UID
}

// Cascade returns the objects the garbage collector deletes, as the
// cascade guard reckons it, when the object with UID root in namespace ns
// is deleted with policy (nothing for Orphan), and why the walk stopped
// early ("" when it finished, else one of the Incomplete reasons). It is
// the guard's own walk, for tools that explain its answers (kubectl lock
// why).
func Cascade(ctx context.Context, graph OwnerGraph, ns string, root types.UID, policy metav1.DeletionPropagation, limits CascadeLimits) ([]Dependent, string) {
	var h Handler
	WithCascadeGuard(graph, CascadeDeny, limits)(&h)
	c := h.cascade.walk(ctx, ns, root, policy)
	out := make([]Dependent, 0, len(c.deleted))
	for _, m := range c.deleted {
		out = append(out, Dependent{Kind: m.gk, Object: m.meta, Owner: m.via})
	}
	return out, c.incomplete
}

// cascade is the outcome of a walk: the objects deleted (root excepted),
// and why the walk stopped early ("" when it finished).
type cascade struct {
	deleted    []*member
	incomplete string
	detail     string
}

// rootPolicy is how the API server deletes the object of req, and so how
// the garbage collector treats its dependents (k8s.io/apiserver's
// registry Store: shouldOrphanDependents and shouldDeleteDependents): the
// deprecated orphanDependents, then propagationPolicy, then the object's
// orphan or foregroundDeletion finalizer, then the default of custom
// resources, background.
func rootPolicy(req Request) metav1.DeletionPropagation {
	if o := req.Options.OrphanDependents; o != nil {
		if *o {
			return metav1.DeletePropagationOrphan
		}
		return metav1.DeletePropagationBackground
	}
	if p := req.Options.PropagationPolicy; p != nil {
		switch *p {
		case metav1.DeletePropagationOrphan, metav1.DeletePropagationBackground, metav1.DeletePropagationForeground:
			return *p
		}
	}
	return finalizerPolicy(req.OldObject.Metadata.Finalizers)
}

// finalizerPolicy is the policy an object's finalizers set (the first of
// orphan and foregroundDeletion), background without either.
func finalizerPolicy(finalizers []string) metav1.DeletionPropagation {
	for _, f := range finalizers {
		switch f {
		case metav1.FinalizerOrphanDependents:
			return metav1.DeletePropagationOrphan
		case metav1.FinalizerDeleteDependents:
			return metav1.DeletePropagationForeground
		}
	}
	return metav1.DeletePropagationBackground
}

// walk returns what deleting the object with UID root in namespace ns with
// policy deletes, as the garbage collector would: the fixed point of
// dependentsDeleted from the root down, within the guard's limits and the
// context's deadline.
func (g *cascadeGuard) walk(ctx context.Context, ns string, root types.UID, policy metav1.DeletionPropagation) cascade {
	members := map[types.UID]*member{root: {policy: policy}}
	var out cascade
	if policy == metav1.DeletePropagationOrphan {
		return out
	}
	queue := []types.UID{root}
	visited := 0
	for len(queue) > 0 && out.incomplete == "" {
		owner := members[queue[0]]
		queue = queue[1:]
		if owner.depth >= g.limits.MaxDepth {
			out.incomplete, out.detail = IncompleteDepth, fmt.Sprintf("owner chains longer than %d", g.limits.MaxDepth)
			break
		}
		uid := root
		if owner.meta != nil {
			uid = owner.meta.UID
		}
		err := g.graph.Dependents(ns, uid, func(gk schema.GroupKind, o *metav1.PartialObjectMetadata) bool {
			if visited++; visited > g.limits.MaxObjects {
				out.incomplete, out.detail = IncompleteObjects, fmt.Sprintf("more than %d dependents", g.limits.MaxObjects)
				return false
			}
			if visited%1024 == 0 && ctx.Err() != nil {
				out.incomplete, out.detail = IncompleteDeadline, "the review's deadline"
				return false
			}
			p, deleted := g.dependentsDeleted(ns, o, members)
			if !deleted {
				return true
			}
			if m := members[o.UID]; m != nil {
				// Reached again through another owner: only a policy that
				// now deletes its dependents changes anything.
				if m.policy == metav1.DeletePropagationOrphan && p != m.policy {
					m.policy = p
					queue = append(queue, o.UID)
				}
				return true
			}
			m := &member{gk: gk, meta: o, policy: p, depth: owner.depth + 1, via: uid}
			members[o.UID] = m
			out.deleted = append(out.deleted, m)
			if p != metav1.DeletePropagationOrphan {
				queue = append(queue, o.UID)
			}
			return true
		})
		if err != nil {
			out.incomplete, out.detail = IncompleteUnsynced, err.Error()
		}
	}
	return out
}

// dependentsDeleted is the one place that decides whether the garbage
// collector deletes o, a dependent of an object of members (the objects
// this cascade deletes, with their policies), and with which policy
// (k8s.io/kubernetes pkg/controller/garbagecollector, attemptToDeleteItem
// and classifyReferences). o is deleted when at least one of its owners is
// deleted here with a policy other than Orphan, and no owner stays:
//
//   - an owner deleted here with Orphan does not delete o (the collector
//     removes the reference to it), nor keeps it;
//   - an owner that does not exist, or is another object with the same
//     name (a dangling reference), or is being deleted itself, does not
//     keep o;
//   - any other owner keeps o, and so does one the graph cannot see
//     (another group, a cluster-scoped kind): lockguard cannot tell
//     whether it stays, and errs towards allowing the root's delete (the
//     object guard still denies the collector's delete of a locked o).
//
// o is deleted in the foreground when an owner is deleted so here and o
// has dependents of its own, otherwise as its finalizers say.
func (g *cascadeGuard) dependentsDeleted(ns string, o *metav1.PartialObjectMetadata, members map[types.UID]*member) (metav1.DeletionPropagation, bool) {
	deleting, foreground := false, false
	for _, ref := range o.OwnerReferences {
		if m := members[ref.UID]; m != nil {
			if m.policy != metav1.DeletePropagationOrphan {
				deleting = true
				foreground = foreground || m.policy == metav1.DeletePropagationForeground
			}
			continue
		}
		owner, watched := g.graph.Owner(ns, ref)
		switch {
		case !watched:
			return "", false
		case owner == nil || owner.UID != ref.UID:
			// Dangling.
		case owner.DeletionTimestamp != nil:
			foreground = foreground || slices.Contains(owner.Finalizers, metav1.FinalizerDeleteDependents)
		default:
			return "", false
		}
	}
	if !deleting {
		return "", false
	}
	if foreground && g.hasDependents(ns, o.UID) {
		return metav1.DeletePropagationForeground, true
	}
	return finalizerPolicy(o.Finalizers), true
}

// hasDependents reports whether the graph holds a dependent of uid.
func (g *cascadeGuard) hasDependents(ns string, uid types.UID) bool {
	found := false
	_ = g.graph.Dependents(ns, uid, func(schema.GroupKind, *metav1.PartialObjectMetadata) bool {
		found = true
		return false
	})
	return found
}

// lockedDependent is an object of the cascade that live Locks protect.
type lockedDependent struct {
	name  string // Kind/name
	locks []lockv1alpha1.Lock
}

// decideCascade walks the cascade of req, a DELETE the object guard
// allowed, and returns the answer when the cascade guard has one (decided
// true): a denial (and the Locks that deny it), or an allowed delete with
// a warning. decided is false when the cascade reaches no locked object,
// the object guard's answer stands.
func (h *Handler) decideCascade(ctx context.Context, req Request, target lockv1alpha1.TargetKey) (resp admission.Response, locks []lockv1alpha1.Lock, decided bool) {
	g := h.cascade
	uid := req.OldObject.Metadata.UID
	if uid == "" {
		return admission.Response{}, nil, false
	}
	policy := rootPolicy(req)
	walked := policy
	if policy == metav1.DeletePropagationOrphan {
		// Nothing is deleted; walk as background to name the locked
		// dependents the orphaning leaves.
		walked = metav1.DeletePropagationBackground
	}
	c := g.walk(ctx, target.Namespace, uid, walked)
	locked, err := h.lockedIn(ctx, target.Namespace, c.deleted)
	if err != nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not verify the Locks on the dependents of %s %s/%s, so the delete is refused; retry when lockguard is ready: %w",
			target.GroupKind(), target.Namespace, target.Name, err)), nil, true
	}
	h.metrics.cascadeIncomplete(c.incomplete)
	locks = locksOf(locked)
	switch {
	case len(locked) > 0 && policy == metav1.DeletePropagationOrphan:
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"the dependents of this resource are orphaned, not deleted; locked dependents that stay: %s (Lock(s) %v)",
			dependentNames(locked), lockNames(locks, false, 0))), nil, true
	case len(locked) > 0 && g.mode == CascadeWarn:
		return admission.Allowed("").WithWarnings(CascadeWarning(locks, dependentList(locked))), nil, true
	case len(locked) > 0:
		return admission.Denied(CascadeDenialMessage(locks, dependentList(locked))), locks, true
	case c.incomplete != "" && policy != metav1.DeletePropagationOrphan:
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"lockguard could not check all of this delete's cascade (%s): if the garbage collector reaches a locked resource, its delete is denied and the cascade stops there", c.detail)), nil, true
	}
	return admission.Response{}, nil, false
}

// lockedIn returns the objects of deleted that live Locks protect: those
// the index holds, or, when it holds none and the handler confirms what
// it would allow (a cache that lags must not let a cascade through that
// the API server's Locks would deny), those of the namespace's Locks read
// from the API server.
func (h *Handler) lockedIn(ctx context.Context, ns string, deleted []*member) ([]lockedDependent, error) {
	if len(deleted) == 0 {
		return nil, nil
	}
	// Before the index: see Freshness.MayLack.
	reason, mayLack := h.locks.mayLackAny(ns, deleted)
	var locked []lockedDependent
	for _, m := range deleted {
		if lockv1alpha1.Protectable(m.gk) != nil {
			continue
		}
		ls, err := h.locks.index.LiveLocks(keyOf(ns, m))
		if err != nil {
			return nil, err
		}
		if len(ls) > 0 {
			locked = append(locked, lockedDependent{name: m.gk.Kind + "/" + m.meta.Name, locks: ls})
		}
	}
	if len(locked) > 0 || h.locks.live == nil || !mayLack {
		return locked, nil
	}
	if h.locks.fresh != nil {
		h.locks.fresh.Confirmed(reason)
	}
	live, err := listLiveLocks(ctx, h.locks.live, ns)
	if err != nil {
		return nil, err
	}
	byTarget := map[lockv1alpha1.TargetKey][]lockv1alpha1.Lock{}
	for _, l := range live {
		key, _ := l.LiveTarget()
		byTarget[key] = append(byTarget[key], l)
	}
	for _, m := range deleted {
		if ls := byTarget[keyOf(ns, m)]; len(ls) > 0 {
			locked = append(locked, lockedDependent{name: m.gk.Kind + "/" + m.meta.Name, locks: ls})
		}
	}
	return locked, nil
}

// mayLackAny reports whether the index may lack a live Lock of one of
// deleted, and why (Freshness, as the object guard asks it). Without a
// Freshness, it may.
func (f *lockFinder) mayLackAny(ns string, deleted []*member) (string, bool) {
	if f.fresh == nil {
		return "", true
	}
	for _, m := range deleted {
		if reason, mayLack := f.fresh.MayLack(keyOf(ns, m)); mayLack {
			return reason, true
		}
	}
	return "", false
}

// keyOf is the target key of m in namespace ns.
func keyOf(ns string, m *member) lockv1alpha1.TargetKey {
	return lockv1alpha1.TargetKey{Namespace: ns, Group: m.gk.Group, Kind: m.gk.Kind, Name: m.meta.Name}
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

// capJoin joins at most maxNamed of names with ", ", then "and N more".
func capJoin(names []string) string {
	if len(names) > maxNamed {
		return strings.Join(names[:maxNamed], ", ") + fmt.Sprintf(" and %d more", len(names)-maxNamed)
	}
	return strings.Join(names, ", ")
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

// cascadeOf is decideCascade for req, which the object guard answered
// resp, when the handler walks cascades and req is the allowed DELETE of
// a named core.navique.com object that Locks can protect (never a Lock:
// deleting a Lock is never blocked).
func (h *Handler) cascadeOf(ctx context.Context, req Request, resp admission.Response) (admission.Response, []lockv1alpha1.Lock, bool) {
	if h.cascade == nil || !resp.Allowed || req.Operation != admissionv1.Delete || req.Namespace == "" {
		return admission.Response{}, nil, false
	}
	target := lockv1alpha1.TargetKey{Namespace: req.Namespace, Group: req.Kind.Group, Kind: req.Kind.Kind, Name: targetName(req)}
	if target.Name == "" || lockv1alpha1.Protectable(target.GroupKind()) != nil {
		return admission.Response{}, nil, false
	}
	gctx, cancel := guardContext(ctx)
	defer cancel()
	return h.decideCascade(gctx, req, target)
}
