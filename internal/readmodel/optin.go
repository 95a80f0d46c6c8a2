package readmodel

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/discovery"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Kinds of other groups, by opt-in (docs/contract.md rule 21): the
// installation lists resources (lockguard --protect-resource, the chart's
// protect.resources), lockguard resolves them to kinds once at start
// (ResolveOptIn), and Kinds serves them beside the group's own (WithOptIn),
// so that the reconciler's target watches, the owner index and the
// resolution of a Lock's kinds hold them as they hold the group's.

// ParseProtectResource parses a --protect-resource value: <resource> for
// the core API group ("persistentvolumeclaims", "secrets") or
// <resource>.<group> ("statefulsets.apps"), as kubectl names resources.
func ParseProtectResource(s string) (schema.GroupResource, error) {
	resource, group, _ := strings.Cut(strings.TrimSpace(s), ".")
	gr := schema.GroupResource{Group: group, Resource: resource}
	if errs := validation.IsDNS1123Label(resource); resource == "" || len(errs) > 0 {
		return gr, fmt.Errorf("%q: the resource must be a lower-case plural resource name, as kubectl api-resources lists it (persistentvolumeclaims, secrets, statefulsets.apps): %s", s, strings.Join(errs, "; "))
	}
	if group != "" {
		if errs := validation.IsDNS1123Subdomain(group); len(errs) > 0 {
			return gr, fmt.Errorf("%q: the group %q is not a DNS subdomain: %s", s, group, strings.Join(errs, "; "))
		}
	}
	if group == lockv1alpha1.Group {
		return gr, fmt.Errorf("%q: every kind of %s can be locked without opt-in", s, lockv1alpha1.Group)
	}
	if gr == (schema.GroupResource{Resource: "namespaces"}) {
		return gr, fmt.Errorf("%q: namespaces are cluster-scoped and guarded through the Locks they hold (docs/contract.md rule 11)", s)
	}
	return gr, nil
}

// ResolveOptIn returns the kinds of the resources grs as d serves them
// (for SetOptedIn and WithOptIn), or an error naming each resource that
// cannot be protected: not served, cluster-scoped (a Lock protects objects
// of its own namespace), or without the verbs lockguard needs (list, watch
// and patch for the annotation, delete for there to be anything to guard).
func ResolveOptIn(d discovery.DiscoveryInterface, grs []schema.GroupResource) ([]schema.GroupKind, error) {
	var out []schema.GroupKind
	var problems []string
	byGroup := map[string][]ServedKind{}
	for _, gr := range grs {
		kinds, read := byGroup[gr.Group]
		if !read {
			var err error
			if kinds, err = groupKinds(d, gr.Group, nil); err != nil {
				return nil, err
			}
			byGroup[gr.Group] = kinds
		}
		i := slices.IndexFunc(kinds, func(k ServedKind) bool { return k.Resource == gr })
		name := protectResourceName(gr)
		switch {
		case i < 0:
			problems = append(problems, fmt.Sprintf("%s: the API server serves no resource %q in group %q (kubectl api-resources lists them)", name, gr.Resource, gr.Group))
		case !kinds[i].Namespaced:
			problems = append(problems, fmt.Sprintf("%s: %s is cluster-scoped, and a Lock protects objects of its own namespace", name, kinds[i].GVK.GroupKind()))
		case !kinds[i].Watchable:
			problems = append(problems, fmt.Sprintf("%s: %s cannot be listed, watched and patched", name, kinds[i].GVK.GroupKind()))
		default:
			out = append(out, kinds[i].GVK.GroupKind())
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("--protect-resource: %s", strings.Join(problems, "; "))
	}
	return out, nil
}

// protectResourceName returns gr as --protect-resource spells it.
func protectResourceName(gr schema.GroupResource) string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

// WithOptIn makes t serve, beside the group's kinds, the resources grs of
// other groups (docs/contract.md rule 21). Call it before any lookup.
func (t *Kinds) WithOptIn(grs []schema.GroupResource) *Kinds {
	t.optIn = slices.Clone(grs)
	return t
}

// withOptedIn returns kinds with the opted-in resources' kinds added,
// sorted by Kind. A resource no longer served is left out (its Locks are
// then MissingReference, as for a kind of the group not installed).
func (t *Kinds) withOptedIn(kinds []ServedKind) ([]ServedKind, error) {
	if len(t.optIn) == 0 {
		return kinds, nil
	}
	var groups []string
	for _, gr := range t.optIn {
		if !slices.Contains(groups, gr.Group) {
			groups = append(groups, gr.Group)
		}
	}
	for _, g := range groups {
		more, err := groupKinds(t.discovery, g, func(gr schema.GroupResource) bool { return slices.Contains(t.optIn, gr) })
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, more...)
	}
	slices.SortFunc(kinds, func(a, b ServedKind) int { return strings.Compare(a.GVK.Kind, b.GVK.Kind) })
	return kinds, nil
}
