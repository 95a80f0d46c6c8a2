package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// servedKind is a kind of the core.navique.com group as discovery serves
// it: the one spelling of a kind that lockguard uses, for the target
// watches, the target keys they produce and the annotation they keep.
type servedKind struct {
	// GVK is the group, the version watched (the group's preferred
	// version when it serves the kind) and the Kind exactly as served.
	GVK schema.GroupVersionKind
	// Resource is the resource that serves the kind: what a watch is keyed
	// by, so that no resource is ever watched twice.
	Resource schema.GroupResource
	// Namespaced is false for a cluster-scoped kind.
	Namespaced bool
	// Watchable is true when the resource can be listed, watched and
	// patched.
	Watchable bool

	singular   string
	shortNames []string
}

// spelledLike reports whether s names k case-insensitively: its Kind, its
// resource (plural), singular or short names, as kubectl accepts them.
func (k servedKind) spelledLike(s string) bool {
	if strings.EqualFold(s, k.GVK.Kind) || strings.EqualFold(s, k.Resource.Resource) || strings.EqualFold(s, k.singular) {
		return true
	}
	return slices.ContainsFunc(k.shortNames, func(n string) bool { return strings.EqualFold(s, n) })
}

// errKindNotServed is the error of a kind that the group does not serve
// under any spelling: it may be installed later.
var errKindNotServed = errors.New("kind not served")

// misspelledKindError is the error of a kind that the group does not
// serve as written, but serves under another spelling.
type misspelledKindError struct {
	Written string
	Served  string
}

func (e *misspelledKindError) Error() string {
	return fmt.Sprintf("%s serves no kind %q; did you mean %s? (targetRef cannot be changed: create a Lock of kind %s, then delete this one)",
		lockv1alpha1.Group, e.Written, e.Served, e.Served)
}

// kindTable holds the kinds of the core.navique.com group, read from
// discovery, and looks kinds up by their exact, served spelling only
// (client-go's discovery RESTMapper also maps the lower-cased kind, and
// answers with the spelling asked for, which made one resource appear as
// two kinds). A lookup that misses rereads discovery, at most once per
// minRefresh, so that a kind installed after lockguard started is found.
type kindTable struct {
	discovery  discovery.DiscoveryInterface
	minRefresh time.Duration

	mu          sync.Mutex
	kinds       []servedKind
	read        bool
	lastRefresh time.Time
}

func newKindTable(d discovery.DiscoveryInterface) *kindTable {
	return &kindTable{discovery: d, minRefresh: 2 * time.Second}
}

// lookup returns the served kind whose Kind is exactly kind. Otherwise it
// returns a *misspelledKindError when the group serves kind under another
// spelling, or errKindNotServed.
func (t *kindTable) lookup(kind string) (servedKind, error) {
	t.mu.Lock()
	kinds, read := t.kinds, t.read
	t.mu.Unlock()
	k, err := find(kinds, kind)
	if err == nil || (read && !t.mayRefresh()) {
		return k, err
	}
	if kinds, err = t.refresh(); err != nil {
		return servedKind{}, err
	}
	return find(kinds, kind)
}

func find(kinds []servedKind, kind string) (servedKind, error) {
	for _, k := range kinds {
		if k.GVK.Kind == kind {
			return k, nil
		}
	}
	for _, k := range kinds {
		if k.spelledLike(kind) {
			return servedKind{}, &misspelledKindError{Written: kind, Served: k.GVK.Kind}
		}
	}
	return servedKind{}, errKindNotServed
}

func (t *kindTable) mayRefresh() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.lastRefresh) < t.minRefresh {
		return false
	}
	t.lastRefresh = time.Now()
	return true
}

// refresh rereads the group's kinds from discovery and returns them.
func (t *kindTable) refresh() ([]servedKind, error) {
	kinds, err := groupKinds(t.discovery, lockv1alpha1.Group)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kinds, t.read = kinds, true
	return kinds, nil
}

// groupKinds returns the kinds of group that discovery serves, one per
// resource (subresources left out), in the group's preferred version when
// it serves them, otherwise in the first version that does, sorted by
// Kind.
func groupKinds(d discovery.DiscoveryInterface, group string) ([]servedKind, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("listing API groups: %w", err)
	}
	var versions []string
	for _, g := range groups.Groups {
		if g.Name != group {
			continue
		}
		versions = append(versions, g.PreferredVersion.GroupVersion)
		for _, v := range g.Versions {
			if v.GroupVersion != g.PreferredVersion.GroupVersion {
				versions = append(versions, v.GroupVersion)
			}
		}
	}
	byResource := map[schema.GroupResource]servedKind{}
	for _, v := range versions {
		gv, err := schema.ParseGroupVersion(v)
		if err != nil {
			return nil, fmt.Errorf("parsing group version %q: %w", v, err)
		}
		resources, err := d.ServerResourcesForGroupVersion(v)
		if err != nil {
			return nil, fmt.Errorf("listing the resources of %s: %w", v, err)
		}
		for _, r := range resources.APIResources {
			gr := schema.GroupResource{Group: group, Resource: r.Name}
			if _, seen := byResource[gr]; seen || strings.Contains(r.Name, "/") {
				continue
			}
			byResource[gr] = servedKind{
				GVK:        gv.WithKind(r.Kind),
				Resource:   gr,
				Namespaced: r.Namespaced,
				Watchable:  hasVerbs(r, "list", "watch", "patch"),
				singular:   r.SingularName,
				shortNames: r.ShortNames,
			}
		}
	}
	kinds := make([]servedKind, 0, len(byResource))
	for _, k := range byResource {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b servedKind) int { return strings.Compare(a.GVK.Kind, b.GVK.Kind) })
	return kinds, nil
}

func hasVerbs(r metav1.APIResource, verbs ...string) bool {
	for _, v := range verbs {
		if !slices.Contains(r.Verbs, v) {
			return false
		}
	}
	return true
}
