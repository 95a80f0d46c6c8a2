package webhook

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// selectorProtects reports whether the live selector Lock l protects
// something a namespace or CRD delete would remove (docs/contract.md rule 15):
// for a namespace delete (kind empty), its namespace itself when its
// selector is empty, or an existing object of its namespace it covers; for
// a CRD delete, an existing object of kind it covers. Objects are read from
// the API server, once per namespace and kind and decision (seen). A kind
// lockguard's RESTMapper does not know, or kinds it cannot list (no
// ClusterConfig.Served), count as covered: a guard that cannot check only
// errs towards denying.
func (g *clusterGuards) selectorProtects(ctx context.Context, l *lockv1alpha1.Lock, kind schema.GroupKind, seen map[nsKind]presence) (bool, error) {
	now := g.locks.now()
	if kind.Empty() && l.CoversNamespace(now) {
		return true, nil
	}
	kinds, err := g.selectorKinds(l, kind)
	if err != nil || kinds == nil {
		return err == nil, err
	}
	for _, gk := range kinds {
		p, err := g.presence(ctx, nsKind{l.Namespace, gk}, seen)
		if err != nil {
			return false, err
		}
		if !p.mapped {
			return true, nil
		}
		for name, alive := range p.objects {
			if alive && l.Covers(lockv1alpha1.Object{Namespace: l.Namespace, Group: gk.Group, Kind: gk.Kind, Name: name, Labels: p.labels[name]}, now) {
				return true, nil
			}
		}
	}
	return false, nil
}

// selectorKinds returns the kinds whose objects l may cover: kind when
// set, else its selector's kinds (lockv1alpha1.SelectorKind), else the
// group's served kinds; nil (and
// no error) when those cannot be listed.
func (g *clusterGuards) selectorKinds(l *lockv1alpha1.Lock, kind schema.GroupKind) ([]schema.GroupKind, error) {
	if !kind.Empty() {
		return []schema.GroupKind{kind}, nil
	}
	if ks := l.Spec.Selector.Kinds; len(ks) > 0 {
		out := make([]schema.GroupKind, 0, len(ks))
		for _, k := range ks {
			out = append(out, lockv1alpha1.SelectorKind(k))
		}
		return out, nil
	}
	if g.served == nil {
		return nil, nil
	}
	served, err := g.served()
	if err != nil {
		return nil, fmt.Errorf("listing the kinds of %s: %w", lockv1alpha1.Group, err)
	}
	out := make([]schema.GroupKind, 0, len(served))
	for _, gk := range served {
		// A selector without kinds covers the group's kinds alone; an
		// opted-in kind only where named (docs/contract.md rule 21).
		if gk.Group == lockv1alpha1.Group && lockv1alpha1.Protectable(gk) == nil {
			out = append(out, gk)
		}
	}
	return out, nil
}
