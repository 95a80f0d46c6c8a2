package webhook

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The cascade guard (docs/contract.md rule 6): the DELETE of an owner that the
// object guard allows is denied when the garbage collector would, as a
// result, delete a locked object, so that a cascade is all or nothing
// rather than stopped half-way at the locked object (whose own delete the
// object guard still denies). It walks ownerReferences down through the
// group's kinds, by UID, in the owner's namespace, with the collector's
// rules (dependentsDeleted), over metadata caches every replica keeps
// (OwnerGraph, in lockguard readmodel.OwnerIndex).

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
// readmodel.OwnerIndex). Its objects are shared: read-only.
type OwnerGraph interface {
	// Dependents calls fn with each object in namespace ns whose
	// ownerReferences name the UID owner, and its kind, until fn returns
	// false. It returns an error when it cannot tell (a kind's cache has
	// not synced).
	Dependents(ns string, owner types.UID, fn func(schema.GroupKind, metav1.Object) bool) error
	// Owner returns the object ref names in namespace ns (nil when there
	// is none), whatever its UID; watched is false when the graph does not
	// hold ref's kind, and so cannot tell.
	Owner(ns string, ref metav1.OwnerReference) (o metav1.Object, watched bool)
}

// CascadeLimits bound the walk of one cascade.
type CascadeLimits struct {
	// MaxDepth is the longest chain of owners followed. Default 64.
	MaxDepth int
	// MaxObjects is the most dependents looked at. Default 100,000.
	MaxObjects int
	// MaxListed is the most objects of the owner's namespace read from
	// the API server for one walk while the owner graph cannot answer
	// (CascadeConfig.API): a namespace that holds more refuses the
	// delete until the graph has synced. Default 10,000.
	MaxListed int
}

// cascadeWalker walks cascades over graph, within limits.
type cascadeWalker struct {
	graph  OwnerGraph
	limits CascadeLimits
}

// newCascadeWalker returns the walker of graph within limits, whose zero
// fields take their defaults.
func newCascadeWalker(graph OwnerGraph, limits CascadeLimits) cascadeWalker {
	if limits.MaxDepth <= 0 {
		limits.MaxDepth = 64
	}
	if limits.MaxObjects <= 0 {
		limits.MaxObjects = 100_000
	}
	if limits.MaxListed <= 0 {
		limits.MaxListed = 10_000
	}
	return cascadeWalker{graph: graph, limits: limits}
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
	meta   metav1.Object
	policy metav1.DeletionPropagation
	depth  int
	via    types.UID // the owner through which the walk first reached it
}

// Dependent is an object a cascade deletes.
type Dependent struct {
	// Kind is its group and kind.
	Kind schema.GroupKind
	// Object is its metadata, as the graph holds it: read-only.
	Object metav1.Object
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
	c := newCascadeWalker(graph, limits).walk(ctx, ns, root, policy)
	out := make([]Dependent, 0, len(c.deleted))
	for _, m := range c.deleted {
		out = append(out, Dependent{Kind: m.gk, Object: m.meta, Owner: m.via})
	}
	return out, c.incomplete
}

// walked is the outcome of a walk: the objects deleted (root excepted),
// and why the walk stopped early ("" when it finished).
type walked struct {
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
func (g cascadeWalker) walk(ctx context.Context, ns string, root types.UID, policy metav1.DeletionPropagation) walked {
	if policy == metav1.DeletePropagationOrphan || g.limits.MaxDepth > 0 && g.noDependents(ns, root) {
		// Nothing to walk (most deletes): the walk below would find
		// nothing either, at the cost of its maps.
		return walked{}
	}
	members := map[types.UID]*member{root: {policy: policy}}
	var out walked
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
			uid = owner.meta.GetUID()
		}
		err := g.graph.Dependents(ns, uid, func(gk schema.GroupKind, o metav1.Object) bool {
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
			ouid := o.GetUID()
			if m := members[ouid]; m != nil {
				// Reached again through another owner: only a policy that
				// now deletes its dependents changes anything.
				if m.policy == metav1.DeletePropagationOrphan && p != m.policy {
					m.policy = p
					queue = append(queue, ouid)
				}
				return true
			}
			m := &member{gk: gk, meta: o, policy: p, depth: owner.depth + 1, via: uid}
			members[ouid] = m
			out.deleted = append(out.deleted, m)
			if p != metav1.DeletePropagationOrphan {
				queue = append(queue, ouid)
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
func (g cascadeWalker) dependentsDeleted(ns string, o metav1.Object, members map[types.UID]*member) (metav1.DeletionPropagation, bool) {
	deleting, foreground := false, false
	for _, ref := range o.GetOwnerReferences() {
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
		case owner == nil || owner.GetUID() != ref.UID:
			// Dangling.
		case owner.GetDeletionTimestamp() != nil:
			foreground = foreground || slices.Contains(owner.GetFinalizers(), metav1.FinalizerDeleteDependents)
		default:
			return "", false
		}
	}
	if !deleting {
		return "", false
	}
	if foreground && g.hasDependents(ns, o.GetUID()) {
		return metav1.DeletePropagationForeground, true
	}
	return finalizerPolicy(o.GetFinalizers()), true
}

// noDependents reports whether the graph holds no dependent of uid, and
// can tell (false when it cannot: the walk reports why).
func (g cascadeWalker) noDependents(ns string, uid types.UID) bool {
	found := false
	err := g.graph.Dependents(ns, uid, func(schema.GroupKind, metav1.Object) bool {
		found = true
		return false
	})
	return err == nil && !found
}

// hasDependents reports whether the graph holds a dependent of uid.
func (g cascadeWalker) hasDependents(ns string, uid types.UID) bool {
	found := false
	_ = g.graph.Dependents(ns, uid, func(schema.GroupKind, metav1.Object) bool {
		found = true
		return false
	})
	return found
}
