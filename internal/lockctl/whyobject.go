package lockctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

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
	d := newDecider(c.namespace, locks)
	gvk := t.mapping.GroupVersionKind
	resp, direct, err := d.decide(ctx, gvk, t.name, obj.Object)
	if err != nil {
		return nil, err
	}
	r := &whyReport{
		Target:   whyTarget{Group: gvk.Group, Kind: gvk.Kind, Namespace: c.namespace, Name: t.name},
		Deletion: decisionOf(resp, decidedByWebhook),
		Direct:   []whyLock{},
		Inside:   []whyLock{},
	}
	for i := range direct {
		r.Direct = append(r.Direct, newWhyLock(&direct[i]))
	}
	r.Descendants, err = d.descendants(ctx, c, obj.GetUID())
	if err != nil {
		return nil, err
	}
	r.ProtectNothing = []whyLock{}
	r.Notes = objectNotes(r)
	return r, nil
}

// lockedBy returns the names of the live Locks that target t.
func lockedBy(locks []lockv1alpha1.Lock, t target) []string {
	var names []string
	for i := range locks {
		key, ok := locks[i].LiveTarget()
		if ok && key.GroupKind() == t.mapping.GroupVersionKind.GroupKind() && key.Name == t.name {
			names = append(names, locks[i].Name)
		}
	}
	slices.Sort(names)
	return names
}

// decider runs lockguard's webhook code (webhook.Handler.Decide) on the
// Locks of a namespace as the plugin listed them, filtered as lockguard's
// index filters them (Lock.LiveTarget), so that the verdict is the
// webhook's by construction rather than re-derived.
type decider struct {
	namespace string
	byTarget  map[lockv1alpha1.TargetKey][]lockv1alpha1.Lock
}

// newDecider indexes the live Locks of a namespace by target.
func newDecider(namespace string, locks []lockv1alpha1.Lock) *decider {
	d := &decider{namespace: namespace, byTarget: map[lockv1alpha1.TargetKey][]lockv1alpha1.Lock{}}
	for i := range locks {
		if key, ok := locks[i].LiveTarget(); ok {
			d.byTarget[key] = append(d.byTarget[key], locks[i])
		}
	}
	return d
}

// decide returns the webhook's answer to a dry-run DELETE of the object
// (name, of kind gvk, in the decider's namespace; obj is the object as
// read) and the Locks its index returned for it, sorted by name.
func (d *decider) decide(ctx context.Context, gvk schema.GroupVersionKind, name string, obj any) (admission.Response, []lockv1alpha1.Lock, error) {
	req, err := deleteRequest(gvk, d.namespace, name, obj)
	if err != nil {
		return admission.Response{}, nil, err
	}
	var found []lockv1alpha1.Lock
	index := webhook.LockIndexFunc(func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		found = slices.Clone(d.byTarget[key])
		return found, nil
	})
	resp := webhook.NewHandler(index, nil).Decide(ctx, req)
	slices.SortFunc(found, func(a, b lockv1alpha1.Lock) int { return strings.Compare(a.Name, b.Name) })
	return resp, found, nil
}

// node is an object of the group in the namespace, as the owner graph
// sees it.
type node struct {
	gvk  schema.GroupVersionKind
	meta *metav1.PartialObjectMetadata
}

// descendants returns the locked objects that a cascading delete of the
// object root would reach: the objects of core.navique.com in the
// namespace that root owns, transitively, through ownerReferences, and
// that the garbage collector would delete (an object with another owner
// among them that stays is not deleted), each with the webhook's verdict
// on the collector's DELETE of it. Owners outside the group are not
// looked at.
func (d *decider) descendants(ctx context.Context, c *clients, root types.UID) ([]whyDescendant, error) {
	objects, err := groupObjects(ctx, c, d.namespace)
	if err != nil {
		return nil, err
	}
	byUID := map[types.UID]node{}
	for _, o := range objects {
		byUID[o.meta.UID] = o
	}
	// parent is the owner through which each cascaded object was reached.
	parent := map[types.UID]types.UID{root: ""}
	for changed := true; changed; {
		changed = false
		for _, o := range objects {
			uid := o.meta.UID
			if _, in := parent[uid]; in || o.meta.DeletionTimestamp != nil {
				continue
			}
			via, kept := types.UID(""), false
			for _, ref := range o.meta.OwnerReferences {
				if _, in := parent[ref.UID]; in {
					if via == "" {
						via = ref.UID
					}
				} else if owner, listed := byUID[ref.UID]; listed && owner.meta.DeletionTimestamp == nil {
					kept = true // an owner that stays keeps it
				}
			}
			if via != "" && !kept {
				parent[uid], changed = via, true
			}
		}
	}
	out := []whyDescendant{}
	for _, o := range objects {
		if _, in := parent[o.meta.UID]; !in || o.meta.UID == root {
			continue
		}
		resp, locks, err := d.decide(ctx, o.gvk, o.meta.Name, o.meta)
		if err != nil {
			return nil, err
		}
		if resp.Allowed {
			continue
		}
		desc := whyDescendant{Kind: o.gvk.Kind, Name: o.meta.Name, OwnerPath: []string{}, Locks: []string{}}
		for p := parent[o.meta.UID]; p != ""; p = parent[p] {
			owner := byUID[p]
			desc.OwnerPath = append([]string{owner.gvk.Kind + "/" + owner.meta.Name}, desc.OwnerPath...)
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
// the server's preferred version.
func groupObjects(ctx context.Context, c *clients, ns string) ([]node, error) {
	groups, err := c.discovery.ServerGroupsWithContext(ctx)
	if err != nil {
		return nil, err
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
		return nil, err
	}
	seen := map[string]bool{}
	var out []node
	for _, gv := range versions {
		list, err := c.discovery.ServerResourcesForGroupVersionWithContext(ctx, gv)
		if err != nil {
			return nil, err
		}
		version, _ := schema.ParseGroupVersion(gv)
		for _, res := range list.APIResources {
			if !res.Namespaced || res.Kind == "Lock" || strings.Contains(res.Name, "/") || seen[res.Name] || !slices.Contains(res.Verbs, "list") {
				continue
			}
			seen[res.Name] = true
			objs, err := meta.Resource(version.WithResource(res.Name)).Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, fmt.Errorf("listing %s in namespace %s: %w", res.Name, ns, err)
			}
			for i := range objs.Items {
				out = append(out, node{gvk: version.WithKind(res.Kind), meta: &objs.Items[i]})
			}
		}
	}
	return out, nil
}

// objectNotes explains a resource's verdict.
func objectNotes(r *whyReport) []string {
	notes := []string{}
	if r.Deletion.Blocked {
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
	if r.Deletion.Blocked {
		notes = append(notes, fmt.Sprintf("Without those, its delete would cascade to %d locked object(s) (Lock(s) %v), whose deletion by the garbage collector is denied.", len(r.Descendants), locks))
	} else {
		notes = append(notes, cascadeNote(len(r.Descendants), locks))
	}
	return notes
}
