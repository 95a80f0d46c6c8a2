package webhook

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The cascade guard before its owner graph can answer (the graph's caches
// have not synced: a replica that just started, or a kind of the group
// installed since): the same walk, over the owner's namespace as the API
// server lists it (metadata lists of every kind the graph holds once
// synced, CascadeConfig.Kinds, paged as the namespace and CRD guards'
// lists are), so that a replica answers owner deletes from its start,
// never from less than the graph would hold: every locked dependent of the
// cascade refuses, and a list that fails refuses the delete. Such walks
// are counted under ReasonOwners, and bounded like the namespace and CRD
// guards' decisions: at most maxListedWalks at once (slots), each holding
// at most CascadeLimits.MaxListed objects.

// ReasonOwners is the reason a replica walks a cascade over the API
// server's lists of the owner's namespace, as lockguard_confirmations_total
// counts it, when its owner graph cannot answer: it has not synced yet.
const ReasonOwners = "owners"

// maxListedWalks bounds the cascades walked over the API server's lists at
// once: each holds the metadata of a namespace's objects (at most
// CascadeLimits.MaxListed of them, about 900 bytes of heap each:
// TestListGraphHeap), and a page of the list.
const maxListedWalks = 2

// listedWalks walk the cascades the owner graph cannot.
type listedWalks struct {
	api   LockLister
	kinds func() ([]schema.GroupVersionKind, error)
	slots slots
}

// newListedWalks returns the listed walks of c; nil when c has no API or
// Kinds: a cascade the graph cannot walk is then allowed with a warning.
func newListedWalks(c CascadeConfig) *listedWalks {
	if c.API == nil || c.Kinds == nil {
		return nil
	}
	return &listedWalks{api: c.API, kinds: c.Kinds, slots: newSlots(maxListedWalks, "cascades over the API server's lists")}
}

// list returns the graph of namespace ns as the API server lists it, of
// every kind w.kinds lists, failing once it holds more than maxObjects
// objects.
func (w *listedWalks) list(ctx context.Context, ns string, maxObjects int) (*listedGraph, error) {
	kinds, err := w.kinds()
	if err != nil {
		return nil, fmt.Errorf("discovering the kinds of the group: %w", err)
	}
	return listGraph(ctx, w.api, kinds, ns, maxObjects)
}

// listedGraph is an OwnerGraph of one namespace, as the API server listed
// it: the objects of each listed kind by name, and by the UIDs their
// ownerReferences name. Its objects keep what the cascade guard reads
// (ownerMetadata).
type listedGraph struct {
	ns      string
	kinds   map[schema.GroupKind]map[string]*metav1.PartialObjectMetadata
	byOwner map[types.UID][]listedObject
}

// listedObject is an object of a listedGraph and its kind.
type listedObject struct {
	gk   schema.GroupKind
	meta *metav1.PartialObjectMetadata
}

// listGraph lists the objects of kinds in namespace ns through api
// (listMetadata) into a listedGraph, failing once it holds more than
// maxObjects objects (a decision must not hold a namespace of any size), or with the
// first list that fails.
func listGraph(ctx context.Context, api LockLister, kinds []schema.GroupVersionKind, ns string, maxObjects int) (*listedGraph, error) {
	g := &listedGraph{ns: ns, kinds: map[schema.GroupKind]map[string]*metav1.PartialObjectMetadata{}, byOwner: map[types.UID][]listedObject{}}
	held := 0
	for _, gvk := range kinds {
		gk := gvk.GroupKind()
		if _, listed := g.kinds[gk]; listed {
			continue
		}
		byName := map[string]*metav1.PartialObjectMetadata{}
		g.kinds[gk] = byName
		err := listMetadata(ctx, api, gvk, ns, func(o *metav1.PartialObjectMetadata) error {
			if held++; held > maxObjects {
				return fmt.Errorf("namespace %s holds more than %d objects of the group, more than lockguard reads from the API server for one delete", ns, maxObjects)
			}
			m := ownerMetadata(o)
			byName[m.Name] = m
			for _, uid := range ownerUIDs(m.OwnerReferences) {
				g.byOwner[uid] = append(g.byOwner[uid], listedObject{gk: gk, meta: m})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return g, nil
}

// ownerMetadata returns what the cascade guard reads of o, a listed
// object: its name, namespace, UID, deletionTimestamp, owner references,
// the garbage collector's finalizers, and, when it has owners (only then
// can a cascade delete it, and a selector Lock's match matter), its
// labels. It shares o's references and labels: o is the page's, and the
// rest of the page is garbage once the next is read.
func ownerMetadata(o *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: o.Name, Namespace: o.Namespace, UID: o.UID, DeletionTimestamp: o.DeletionTimestamp,
		OwnerReferences: o.OwnerReferences,
	}}
	for _, f := range o.Finalizers {
		if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
			m.Finalizers = append(m.Finalizers, f)
		}
	}
	if len(o.OwnerReferences) > 0 {
		m.Labels = o.Labels
	}
	return m
}

// ownerUIDs returns the UIDs refs name, each once (an object may name an
// owner twice; the owner index keeps it once per owner too), sorted.
func ownerUIDs(refs []metav1.OwnerReference) []types.UID {
	uids := make([]types.UID, 0, len(refs))
	for _, ref := range refs {
		uids = append(uids, ref.UID)
	}
	slices.Sort(uids)
	return slices.Compact(uids)
}

// Dependents calls fn with each listed object whose ownerReferences name
// the UID owner, in the order listed, until fn returns false. It fails for
// a namespace other than the one listed.
func (g *listedGraph) Dependents(ns string, owner types.UID, fn func(schema.GroupKind, metav1.Object) bool) error {
	if ns != g.ns {
		return fmt.Errorf("namespace %s was not listed (only %s was)", ns, g.ns)
	}
	for _, o := range g.byOwner[owner] {
		if !fn(o.gk, o.meta) {
			return nil
		}
	}
	return nil
}

// Owner returns the listed object ref names (nil when there is none);
// watched is false for a kind not listed, or a namespace other than the
// one listed.
func (g *listedGraph) Owner(ns string, ref metav1.OwnerReference) (metav1.Object, bool) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ns != g.ns {
		return nil, false
	}
	byName, listed := g.kinds[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
	if !listed {
		return nil, false
	}
	if o := byName[ref.Name]; o != nil {
		return o, true
	}
	// An untyped nil: a nil *PartialObjectMetadata is not a nil Object.
	return nil, true
}
