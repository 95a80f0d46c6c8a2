package webhook

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The cascade guard over a graph that keeps, of its objects' labels, only
// those selector Locks read (LabelKeeper): a Lock on a key the graph does
// not keep yet finds the dependents it covers without that label. The
// walk stays the graph's (its owner references are whole); the labels of
// the dependents it found are then read from the API server
// (relabel) whenever the graph cannot vouch for them (labelsKept).

// LabelKeeper is an OwnerGraph whose objects keep, of their labels, only
// those that selector Locks read (in lockguard, readmodel.OwnerIndex over
// the cache's readmodel.LabelKeys): a selector Lock on a key no Lock of
// the namespace read before finds them without it until the graph has
// stored them again, and the cascade guard then reads the labels of the
// dependents it walked from the API server (relabel).
type LabelKeeper interface {
	// LabelGeneration returns the generation of the label keys the
	// graph keeps of its objects of namespace ns (it changes with each
	// key added, which is added before the Lock index holds the Lock
	// that reads it) and whether those objects carry them all.
	LabelGeneration(ns string) (gen int, complete bool)
	// KeepsLabels reports whether the keys kept of the objects of
	// namespace ns include every key that the selectors of locks read.
	KeepsLabels(ns string, locks []lockv1alpha1.Lock) bool
}

// labelsAt is what a LabelKeeper said of a namespace before a walk.
type labelsAt struct {
	gen      int
	complete bool
}

// labelsKept reports whether the objects of namespace ns that a walk
// read from the graph carry every label that the selectors of the Lock
// index's selector Locks read: the graph said so before the walk (at),
// and its keys have not changed since the index was read (now). When
// the index may lack a Lock (lags), the namespace's Locks as the API
// server lists them must read no key the graph does not keep (false
// when they cannot be read).
func (g *cascadeGuard) labelsKept(ctx context.Context, ns string, at labelsAt, lags bool) bool {
	if gen, _ := g.labels.LabelGeneration(ns); !at.complete || gen != at.gen {
		return false
	}
	if !lags {
		return true
	}
	if g.locks.api == nil {
		return false
	}
	locks, err := g.locks.api.namespace(ctx, ns)
	return err == nil && g.labels.KeepsLabels(ns, locks)
}

// relabel returns deleted (the dependents a walk found in namespace ns)
// with their labels as the API server lists them: one metadata list,
// paged, of each of their kinds in ns, within the listed walks' slots; a
// dependent the lists lack is gone, and dropped. Only the dependents'
// labels are kept of the lists, and only those of kinds a Lock can
// protect are read.
func (g *cascadeGuard) relabel(ctx context.Context, ns string, deleted []*member) ([]*member, error) {
	kinds, err := g.listed.kinds()
	if err != nil {
		return nil, fmt.Errorf("discovering the kinds of the group: %w", err)
	}
	versions := map[schema.GroupKind]schema.GroupVersionKind{}
	for _, gvk := range kinds {
		if _, ok := versions[gvk.GroupKind()]; !ok {
			versions[gvk.GroupKind()] = gvk
		}
	}
	// By kind, in the order the walk met them; a kind no Lock can
	// protect keeps its members as they are (lockedIn skips them).
	var order []schema.GroupKind
	byKind := map[schema.GroupKind]map[types.UID]*member{}
	out := make([]*member, 0, len(deleted))
	for _, m := range deleted {
		if lockv1alpha1.Protectable(m.gk) != nil {
			out = append(out, m)
			continue
		}
		if byKind[m.gk] == nil {
			byKind[m.gk] = map[types.UID]*member{}
			order = append(order, m.gk)
		}
		byKind[m.gk][m.meta.GetUID()] = m
	}
	if err := g.listed.slots.enter(ctx); err != nil {
		return nil, err
	}
	defer g.listed.slots.leave()
	g.locks.confirmed(ReasonOwners)
	for _, gk := range order {
		members := byKind[gk]
		gvk, ok := versions[gk]
		if !ok {
			return nil, fmt.Errorf("kind %s is not one of the group's kinds as discovered", gk)
		}
		err := listMetadata(ctx, g.listed.api, gvk, ns, func(o *metav1.PartialObjectMetadata) error {
			if m := members[o.UID]; m != nil {
				relabelled := *m
				relabelled.meta = &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, UID: o.UID, Labels: o.Labels}}
				out = append(out, &relabelled)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
