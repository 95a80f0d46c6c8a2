package lockctl

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// whyObject answers why for TYPE/NAME, a core.navique.com resource: the
// verdict of lockguard's webhook code on its DELETE, over the namespace's
// Locks as the API server lists them, and the same for each locked
// descendant a cascade would reach.
func whyObject(ctx context.Context, s Streams, c *clients, arg string) (*whyReport, error) {
	t, err := resolveTarget(ctx, c.mapper, arg)
	if err != nil {
		return nil, err
	}
	locks, err := listLocks(ctx, c.dynamic.Resource(locksResource).Namespace(c.namespace))
	if err != nil {
		return nil, err
	}
	obj, err := c.dynamic.Resource(t.mapping.Resource).Namespace(c.namespace).Get(ctx, t.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		// Nothing to delete, and the API server answers NotFound before
		// admission; but a Lock may be waiting for it.
		if waiting := lockedBy(locks, t); len(waiting) > 0 {
			fmt.Fprintf(s.ErrOut, "%s does not exist in namespace %s; Lock(s) %v target it and will protect it once it is created\n", t, c.namespace, waiting)
		}
	}
	if err != nil {
		return nil, err
	}
	objects, kinds, err := groupObjects(ctx, c, c.namespace)
	if err != nil {
		return nil, err
	}
	d := newDecider(c.namespace, locks, newListGraph(objects, kinds))
	gvk := t.mapping.GroupVersionKind
	resp, direct, err := d.decide(ctx, gvk, t.name, obj.Object, true)
	if err != nil {
		return nil, err
	}
	r := &whyReport{
		Target:   whyTarget{Group: gvk.Group, Kind: gvk.Kind, Namespace: c.namespace, Name: t.name, Labels: obj.GetLabels()},
		Deletion: decisionOf(resp, decidedByWebhook),
		Direct:   []whyLock{},
		Inside:   []whyLock{},
	}
	for i := range direct {
		r.Direct = append(r.Direct, newWhyLock(&direct[i]))
	}
	self := lockv1alpha1.Object{Namespace: c.namespace, Group: gvk.Group, Kind: gvk.Kind, Name: t.name, Labels: obj.GetLabels()}
	r.Selectors = selectorVerdicts(locks, self)
	r.Update = updateVerdict(locks, self)
	if r.Update.Frozen {
		if err := probeUpdate(ctx, c, t.mapping.Resource, obj, r.Update); err != nil {
			return nil, err
		}
	}
	r.Descendants, err = d.descendants(ctx, obj.GetUID())
	if err != nil {
		return nil, err
	}
	r.ProtectNothing = []whyLock{}
	r.Notes = objectNotes(r)
	return r, nil
}

// lockedBy returns the names of the live Locks that target t.
func lockedBy(locks []lockv1alpha1.Lock, t target) []string {
	now := clock()
	var names []string
	for i := range locks {
		key, ok := locks[i].LiveTarget(now)
		if ok && key.GroupKind() == t.mapping.GroupVersionKind.GroupKind() && key.Name == t.name {
			names = append(names, locks[i].Name)
		}
	}
	slices.Sort(names)
	return names
}

// decider runs lockguard's webhook code (webhook.Handler.Decide) on the
// Locks of a namespace as the plugin listed them, filtered as lockguard's
// index filters them (Lock.LiveTarget), and on the namespace's objects as
// listed (the owner graph of the cascade guard), so that the verdict is the
// webhook's by construction rather than re-derived.
type decider struct {
	namespace string
	locks     []lockv1alpha1.Lock // the namespace's Locks, as listed
	byTarget  map[lockv1alpha1.TargetKey][]lockv1alpha1.Lock
	selectors []lockv1alpha1.Lock // the live selector Locks
	graph     *listGraph
	now       time.Time // the instant the Locks are live at
}

// newDecider indexes the live Locks of a namespace by target, and keeps
// its live selector Locks apart, as lockguard's index does.
func newDecider(namespace string, locks []lockv1alpha1.Lock, graph *listGraph) *decider {
	d := &decider{namespace: namespace, locks: locks, byTarget: map[lockv1alpha1.TargetKey][]lockv1alpha1.Lock{}, graph: graph, now: clock()}
	for i := range locks {
		if key, ok := locks[i].LiveTarget(d.now); ok {
			d.byTarget[key] = append(d.byTarget[key], locks[i])
		} else if locks[i].HasSelector() && locks[i].Live(d.now) {
			d.selectors = append(d.selectors, locks[i])
		}
	}
	return d
}

// deciderIndex is the decider's Locks as the webhook reads lockguard's
// index (webhook.Locks): by target, and the selector Locks of the
// namespace; webhook.NoLocks answers the lookups of other namespaces.
type deciderIndex struct {
	webhook.NoLocks
	d *decider
}

// LiveLocks returns copies of the decider's Locks of key.
func (x deciderIndex) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	return slices.Clone(x.d.byTarget[key]), nil
}

// LiveSelectorLocksIn returns copies of the decider's selector Locks when
// ns is its namespace.
func (x deciderIndex) LiveSelectorLocksIn(ns string) ([]lockv1alpha1.Lock, error) {
	if ns != x.d.namespace {
		return nil, nil
	}
	return slices.Clone(x.d.selectors), nil
}

// LiveSelectorLocksCovering returns, for each of objs, the decider's
// selector Locks that cover it, when ns is its namespace.
func (x deciderIndex) LiveSelectorLocksCovering(ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	selectors, err := x.LiveSelectorLocksIn(ns)
	return webhook.Covering(selectors, objs, x.d.now), err
}

// decide returns the webhook's answer to a dry-run DELETE of the object
// (name, of kind gvk, in the decider's namespace; obj is the object as
// read), with the cascade guard (in its default mode, Deny) when cascade
// is true, and the Locks that cover the object itself (its targetRef Locks
// and the selector Locks its labels match), sorted by name.
func (d *decider) decide(ctx context.Context, gvk schema.GroupVersionKind, name string, obj any, cascade bool) (admission.Response, []lockv1alpha1.Lock, error) {
	req, err := deleteRequest(gvk, d.namespace, name, obj)
	if err != nil {
		return admission.Response{}, nil, err
	}
	self := lockv1alpha1.TargetKey{Namespace: d.namespace, Group: gvk.Group, Kind: gvk.Kind, Name: name}
	c := webhook.Config{Locks: deciderIndex{d: d}, Now: func() time.Time { return d.now }}
	if cascade {
		c.Cascade = webhook.CascadeConfig{Graph: d.graph, Mode: webhook.CascadeDeny}
	}
	resp := webhook.NewHandler(c).Decide(ctx, req)
	return resp, covering(d.locks, self.Object(req.OldObject.Metadata.Labels)), nil
}

// node is an object of the group in the namespace, as the owner graph
// sees it.
type node struct {
	gvk  schema.GroupVersionKind
	meta *metav1.PartialObjectMetadata
}

// listGraph is the cascade guard's owner graph (webhook.OwnerGraph) over
// the objects of the group the plugin listed in one namespace: what
// lockguard's metadata caches hold, read once.
type listGraph struct {
	kinds      map[schema.GroupKind]bool // the kinds listed
	byUID      map[types.UID]node
	dependents map[types.UID][]node // by owner UID
}

// newListGraph indexes objects, of the listed kinds, by UID and by owner.
func newListGraph(objects []node, kinds map[schema.GroupKind]bool) *listGraph {
	g := &listGraph{kinds: kinds, byUID: map[types.UID]node{}, dependents: map[types.UID][]node{}}
	for _, o := range objects {
		g.byUID[o.meta.UID] = o
		seen := map[types.UID]bool{}
		for _, ref := range o.meta.OwnerReferences {
			if !seen[ref.UID] {
				seen[ref.UID] = true
				g.dependents[ref.UID] = append(g.dependents[ref.UID], o)
			}
		}
	}
	return g
}

// Dependents calls fn with each listed object of namespace ns that owner
// owns.
func (g *listGraph) Dependents(ns string, owner types.UID, fn func(schema.GroupKind, metav1.Object) bool) error {
	for _, o := range g.dependents[owner] {
		if o.meta.Namespace == ns && !fn(o.gvk.GroupKind(), o.meta) {
			return nil
		}
	}
	return nil
}

// Owner returns the listed object ref names in namespace ns; watched is
// false for a kind the plugin did not list.
func (g *listGraph) Owner(ns string, ref metav1.OwnerReference) (metav1.Object, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	if err != nil || !g.kinds[gk] {
		return nil, false
	}
	for _, o := range g.byUID {
		if o.gvk.GroupKind() == gk && o.meta.Namespace == ns && o.meta.Name == ref.Name {
			return o.meta, true
		}
	}
	return nil, true
}

// descendants returns the locked objects that a cascading (background)
// delete of the object root would reach, as the cascade guard walks it
// (webhook.Cascade: the objects of core.navique.com in the namespace that
// root owns, transitively, through ownerReferences, and that the garbage
// collector would delete), each with the webhook's verdict on the
// collector's DELETE of it. Owners outside the group are not looked at.
func (d *decider) descendants(ctx context.Context, root types.UID) ([]whyDescendant, error) {
	deps, _ := webhook.Cascade(ctx, d.graph, d.namespace, root, metav1.DeletePropagationBackground, webhook.CascadeLimits{})
	via := map[types.UID]types.UID{}
	for _, dep := range deps {
		via[dep.Object.GetUID()] = dep.Owner
	}
	out := []whyDescendant{}
	for _, dep := range deps {
		o := d.graph.byUID[dep.Object.GetUID()]
		resp, locks, err := d.decide(ctx, o.gvk, o.meta.Name, o.meta, false)
		if err != nil {
			return nil, err
		}
		if resp.Allowed {
			continue
		}
		desc := whyDescendant{Kind: o.gvk.Kind, Name: o.meta.Name, OwnerPath: []string{}, Locks: []string{}}
		for p := dep.Owner; p != ""; p = via[p] {
			owner := d.graph.byUID[p]
			desc.OwnerPath = append([]string{owner.gvk.Kind + "/" + owner.meta.Name}, desc.OwnerPath...)
			if p == root {
				break
			}
		}
		for _, l := range locks {
			desc.Locks = append(desc.Locks, l.Name)
		}
		if resp.Result != nil {
			desc.Message = resp.Result.Message
		}
		out = append(out, desc)
	}
	slices.SortFunc(out, func(a, b whyDescendant) int {
		return strings.Compare(a.Kind+"/"+a.Name, b.Kind+"/"+b.Name)
	})
	return out, nil
}

// groupObjects lists the metadata of every object of the namespaced kinds
// of core.navique.com (Locks excepted) in namespace ns, each kind through
// the server's preferred version, and returns them with the kinds listed.
func groupObjects(ctx context.Context, c *clients, ns string) ([]node, map[schema.GroupKind]bool, error) {
	groups, err := c.discovery.ServerGroupsWithContext(ctx)
	if err != nil {
		return nil, nil, err
	}
	var versions []string
	for _, g := range groups.Groups {
		if g.Name != lockv1alpha1.Group {
			continue
		}
		versions = append(versions, g.PreferredVersion.GroupVersion)
		for _, v := range g.Versions {
			if v.GroupVersion != g.PreferredVersion.GroupVersion {
				versions = append(versions, v.GroupVersion)
			}
		}
	}
	meta, err := metadata.NewForConfig(c.config)
	if err != nil {
		return nil, nil, err
	}
	seen := map[string]bool{}
	kinds := map[schema.GroupKind]bool{}
	var out []node
	for _, gv := range versions {
		list, err := c.discovery.ServerResourcesForGroupVersionWithContext(ctx, gv)
		if err != nil {
			return nil, nil, err
		}
		version, _ := schema.ParseGroupVersion(gv)
		for _, res := range list.APIResources {
			// Neither Locks nor LockExceptions are ever locked (Protectable).
			if !res.Namespaced || lockv1alpha1.Protectable(schema.GroupKind{Group: lockv1alpha1.Group, Kind: res.Kind}) != nil || strings.Contains(res.Name, "/") || seen[res.Name] || !slices.Contains(res.Verbs, "list") {
				continue
			}
			seen[res.Name] = true
			kinds[schema.GroupKind{Group: lockv1alpha1.Group, Kind: res.Kind}] = true
			objs, err := meta.Resource(version.WithResource(res.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, nil, fmt.Errorf("listing %s in namespace %s: %w", res.Name, ns, err)
			}
			for i := range objs.Items {
				out = append(out, node{gvk: version.WithKind(res.Kind), meta: &objs.Items[i]})
			}
		}
	}
	return out, kinds, nil
}

// objectNotes explains a resource's verdict: denied by its own Locks (the
// object guard), or by its cascade's (the cascade guard).
func objectNotes(r *whyReport) []string {
	notes := []string{}
	byCascade := r.Deletion.Blocked && strings.HasPrefix(r.Deletion.Message, "resource would cascade-delete")
	if r.Deletion.Blocked && !byCascade {
		notes = append(notes, fmt.Sprintf("Deleting it is denied; delete the Lock(s) %v first (kubectl unlock).", r.Deletion.Locks))
	}
	if len(r.Descendants) == 0 {
		return notes
	}
	var locks []string
	for _, d := range r.Descendants {
		for _, l := range d.Locks {
			if !slices.Contains(locks, l) {
				locks = append(locks, l)
			}
		}
	}
	slices.Sort(locks)
	if r.Deletion.Blocked && !byCascade {
		notes = append(notes, fmt.Sprintf("Without those, its delete would cascade to %d locked object(s) (Lock(s) %v), which lockguard's cascade guard denies too.", len(r.Descendants), locks))
	} else {
		notes = append(notes, cascadeNote(len(r.Descendants), locks))
	}
	return notes
}
