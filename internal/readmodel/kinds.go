package readmodel

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

// ServedKind is a kind of the core.navique.com group as discovery serves
// it: the one spelling of a kind that lockguard uses, for the owner index,
// the reconciler's target watches, the target keys they produce and the
// annotation they keep.
type ServedKind struct {
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
func (k ServedKind) spelledLike(s string) bool {
	if strings.EqualFold(s, k.GVK.Kind) || strings.EqualFold(s, k.Resource.Resource) || strings.EqualFold(s, k.singular) {
		return true
	}
	return slices.ContainsFunc(k.shortNames, func(n string) bool { return strings.EqualFold(s, n) })
}

// ErrKindNotServed is the error of a kind that the group does not serve
// under any spelling: it may be installed later.
var ErrKindNotServed = errors.New("kind not served")

// MisspelledKindError is the error of a kind that the group does not
// serve as written, but serves under another spelling.
type MisspelledKindError struct {
	// Written is the kind as the Lock names it.
	Written string
	// Served is the kind as the group serves it.
	Served string
}

// Error tells how to write the kind. A Lock's scope cannot change, so
// its reader adds that a new Lock is needed (Lockable's callers).
func (e *MisspelledKindError) Error() string {
	return fmt.Sprintf("%s serves no kind %q; did you mean %s?", lockv1alpha1.Group, e.Written, e.Served)
}

// ClusterScopedKindError is the error of a kind that the group serves,
// as written, for cluster-scoped resources, which a Lock (namespaced)
// cannot protect.
type ClusterScopedKindError struct {
	// Kind is the kind, as served.
	Kind string
}

// Error says that the kind is cluster-scoped.
func (e *ClusterScopedKindError) Error() string {
	return fmt.Sprintf("%s is cluster-scoped; a Lock protects resources in its own namespace",
		schema.GroupKind{Group: lockv1alpha1.Group, Kind: e.Kind})
}

// Kinds holds the kinds of the core.navique.com group, read from
// discovery, and looks kinds up by their exact, served spelling only
// (client-go's discovery RESTMapper also maps the lower-cased kind, and
// answers with the spelling asked for, which made one resource appear as
// two kinds). A lookup that misses rereads discovery, at most once per
// minRefresh, so that a kind installed after lockguard started is found.
type Kinds struct {
	discovery  discovery.DiscoveryInterface
	minRefresh time.Duration
	// optIn are the resources of other groups the installation opts in
	// (WithOptIn; docs/contract.md rule 21), read with the group's.
	optIn []schema.GroupResource

	mu          sync.Mutex
	kinds       []ServedKind
	read        bool
	readAt      time.Time // when kinds were read
	lastRefresh time.Time
}

// NewKinds returns the kinds of the group as d serves them. It reads
// nothing until a lookup or a refresh.
func NewKinds(d discovery.DiscoveryInterface) *Kinds {
	return &Kinds{discovery: d, minRefresh: 2 * time.Second}
}

// Lookup returns the served kind whose Kind is exactly kind. Otherwise it
// returns a *MisspelledKindError when the group serves kind under another
// spelling, or ErrKindNotServed.
func (t *Kinds) Lookup(kind string) (ServedKind, error) {
	t.mu.Lock()
	kinds, read := t.kinds, t.read
	t.mu.Unlock()
	k, err := find(kinds, kind)
	if err == nil || (read && !t.mayRefresh()) {
		return k, err
	}
	if kinds, err = t.Refresh(); err != nil {
		return ServedKind{}, err
	}
	return find(kinds, kind)
}

// Lockable resolves kind, as a Lock names it (targetRef.kind or one of
// selector.kinds), to the served kind whose objects a Lock can protect:
// Lookup's answer, and a *ClusterScopedKindError for a kind served for
// cluster-scoped resources. This is the one resolution of a Lock's kind
// (docs/contract.md rule 13): the reconciler reports a Lock active only
// where it resolves, since only there does a DELETE of the served kind
// find the Lock.
func (t *Kinds) Lockable(kind string) (ServedKind, error) {
	k, err := t.Lookup(kind)
	if err == nil && !k.Namespaced {
		return ServedKind{}, &ClusterScopedKindError{Kind: k.GVK.Kind}
	}
	return k, err
}

func find(kinds []ServedKind, kind string) (ServedKind, error) {
	for _, k := range kinds {
		if k.GVK.Kind == kind {
			return k, nil
		}
	}
	for _, k := range kinds {
		if k.spelledLike(kind) {
			return ServedKind{}, &MisspelledKindError{Written: kind, Served: k.GVK.Kind}
		}
	}
	return ServedKind{}, ErrKindNotServed
}

func (t *Kinds) mayRefresh() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.lastRefresh) < t.minRefresh {
		return false
	}
	t.lastRefresh = time.Now()
	return true
}

// Refresh rereads the group's kinds from discovery and returns them.
func (t *Kinds) Refresh() ([]ServedKind, error) {
	now := time.Now()
	kinds, err := groupKinds(t.discovery, lockv1alpha1.Group, nil)
	if err != nil {
		return nil, err
	}
	if kinds, err = t.withOptedIn(kinds); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.kinds, t.read, t.readAt = kinds, true, now
	return kinds, nil
}

// Recent returns the group's kinds as discovery served them less than
// maxAge ago, rereading them (Refresh) when the last read is older: two
// loops over the kinds (the owner index's Discovery and the reconciler's
// target watches) then read discovery about once per maxAge between them.
func (t *Kinds) Recent(maxAge time.Duration) ([]ServedKind, error) {
	t.mu.Lock()
	kinds, fresh := t.kinds, t.read && time.Since(t.readAt) < maxAge
	t.mu.Unlock()
	if fresh {
		return kinds, nil
	}
	return t.Refresh()
}

// groupKinds returns the kinds of group that discovery serves, one per
// resource (subresources left out; only the resources keep reports true
// for, when keep is not nil), in the group's preferred version when it
// serves them, otherwise in the first version that does, sorted by Kind.
func groupKinds(d discovery.DiscoveryInterface, group string, keep func(schema.GroupResource) bool) ([]ServedKind, error) {
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
	byResource := map[schema.GroupResource]ServedKind{}
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
			if _, seen := byResource[gr]; seen || strings.Contains(r.Name, "/") || (keep != nil && !keep(gr)) {
				continue
			}
			byResource[gr] = ServedKind{
				GVK:        gv.WithKind(r.Kind),
				Resource:   gr,
				Namespaced: r.Namespaced,
				Watchable:  hasVerbs(r, "list", "watch", "patch"),
				singular:   r.SingularName,
				shortNames: r.ShortNames,
			}
		}
	}
	kinds := make([]ServedKind, 0, len(byResource))
	for _, k := range byResource {
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b ServedKind) int { return strings.Compare(a.GVK.Kind, b.GVK.Kind) })
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

// Watched reports whether lockguard watches kind k, in the owner index and
// the reconciler's target watches: namespaced, watchable, and one a Lock
// may target.
func (k ServedKind) Watched() bool {
	return k.Namespaced && k.Watchable && lockv1alpha1.Protectable(k.GVK.GroupKind()) == nil
}
