package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kinds outside core.navique.com that the installation opts in
// (docs/contract.md rule 21): lockguard --protect-resource, the chart's
// protect.resources. Protectable accepts them besides the group's kinds.
// lockguard sets them once, at start (SetOptedIn), before it serves or
// reconciles anything; every reader (Protectable, Selects, CoversKind,
// SelectorKind) sees the same list.

// optedIn holds the opted-in kinds, sorted; nil or empty: none.
var optedIn atomic.Pointer[[]schema.GroupKind]

// SetOptedIn sets the kinds outside core.navique.com that Locks can
// protect. It refuses a kind of the core.navique.com group (always
// protectable, Locks and LockExceptions never) and two opted-in kinds
// spelled alike (a selector's kinds name a kind by its Kind alone,
// SelectorKind).
func SetOptedIn(gks []schema.GroupKind) error {
	out := slices.Clone(gks)
	slices.SortFunc(out, func(a, b schema.GroupKind) int { return strings.Compare(a.String(), b.String()) })
	out = slices.Compact(out)
	for i, gk := range out {
		if gk.Group == Group {
			return fmt.Errorf("%s needs no opt-in: every kind of the group but Lock and LockException can be locked", gk)
		}
		if gk.Kind == "" {
			return fmt.Errorf("opted-in kind of group %q has no Kind", gk.Group)
		}
		for _, other := range out[:i] {
			if other.Kind == gk.Kind {
				return fmt.Errorf("%s and %s are both opted in: a Lock's selector.kinds names a kind by its Kind alone, so only one kind of each name can be protected", other, gk)
			}
		}
	}
	optedIn.Store(&out)
	return nil
}

// OptedIn returns the kinds outside core.navique.com that Locks can
// protect (SetOptedIn), sorted.
func OptedIn() []schema.GroupKind {
	if p := optedIn.Load(); p != nil {
		return slices.Clone(*p)
	}
	return nil
}

// IsOptedIn reports whether gk is an opted-in kind (OptedIn), without
// copying the list.
func IsOptedIn(gk schema.GroupKind) bool {
	p := optedIn.Load()
	return p != nil && slices.Contains(*p, gk)
}

// SelectorKind returns the group and kind that kind, as a selector's kinds
// list names it, stands for: the opted-in kind of that Kind (a selector
// covers an opted-in kind only where its kinds name it), otherwise the
// core.navique.com kind.
func SelectorKind(kind string) schema.GroupKind {
	if p := optedIn.Load(); p != nil {
		for _, gk := range *p {
			if gk.Kind == kind {
				return gk
			}
		}
	}
	return schema.GroupKind{Group: Group, Kind: kind}
}

// OptInHint says how to make a kind protectable: it is the end of the
// message of a Lock on a kind outside the group that is not opted in.
func OptInHint(gk schema.GroupKind) string {
	flag, value := "<resource>", fmt.Sprintf("{group: \"\", resources: [<resource>]}")
	if gk.Group != "" {
		flag, value = "<resource>."+gk.Group, fmt.Sprintf("{group: %s, resources: [<resource>]}", gk.Group)
	}
	return fmt.Sprintf("%s is not among the kinds this installation protects: to lock it, add %s to the chart's protect.resources (lockguard --protect-resource=%s), then create the Lock again", gk, value, flag)
}
