package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// targetWatches adds, once per kind, a metadata-only watch on a target kind
// to the reconciler. Kinds are added while lockguard runs: when a Lock
// names one, and when discovery finds one in the group.
type targetWatches struct {
	cache      cache.Cache
	controller controller.TypedController[request]

	mu      sync.Mutex
	watched map[schema.GroupKind]bool
}

// ensure watches the metadata of the kind of gvk, if it does not already.
func (w *targetWatches) ensure(gvk schema.GroupVersionKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[gvk.GroupKind()] {
		return nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	toKey := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o *metav1.PartialObjectMetadata) []request {
		return []request{{Target: lockv1alpha1.TargetKey{Namespace: o.Namespace, Group: gvk.Group, Kind: gvk.Kind, Name: o.Name}}}
	})
	// Targets are only interesting when created, deleted, or when their
	// annotations change; their spec and status are none of our business.
	annotationChanged := predicate.TypedAnnotationChangedPredicate[*metav1.PartialObjectMetadata]{}
	if err := w.controller.Watch(source.TypedKind(w.cache, obj, toKey, annotationChanged)); err != nil {
		return fmt.Errorf("watching %s: %w", gvk.GroupKind(), err)
	}
	w.watched[gvk.GroupKind()] = true
	return nil
}

// kindResolver maps kinds through discovery. On a miss it refreshes its
// discovery cache (at most once per minRefresh), so that a kind served
// after lockguard started is found, including one in a version of the group
// that did not exist before (controller-runtime's mapper only refetches
// the versions it already knows).
type kindResolver struct {
	mapper     *restmapper.DeferredDiscoveryRESTMapper
	minRefresh time.Duration

	mu          sync.Mutex
	lastRefresh time.Time
}

func newKindResolver(d discovery.DiscoveryInterface) *kindResolver {
	return &kindResolver{mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d)), minRefresh: 2 * time.Second}
}

func (r *kindResolver) mapping(gk schema.GroupKind) (*meta.RESTMapping, error) {
	m, err := r.mapper.RESTMapping(gk)
	if !meta.IsNoMatchError(err) || !r.mayRefresh() {
		return m, err
	}
	r.mapper.Reset()
	return r.mapper.RESTMapping(gk)
}

func (r *kindResolver) mayRefresh() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.lastRefresh) < r.minRefresh {
		return false
	}
	r.lastRefresh = time.Now()
	return true
}

// kindDiscoverer watches every namespaced kind of the core.navique.com group,
// found through discovery at start and then every interval, so that the
// reconciler sees (and cleans) annotated objects whose Locks were
// deleted while lockguard was not running, whatever their kind.
type kindDiscoverer struct {
	discovery discovery.DiscoveryInterface
	kinds     *kindResolver
	watches   *targetWatches
	interval  time.Duration
}

// NeedLeaderElection is true: the watches feed the reconciler, which only
// runs on the leader.
func (d *kindDiscoverer) NeedLeaderElection() bool { return true }

// Start discovers kinds until ctx is done.
func (d *kindDiscoverer) Start(ctx context.Context) error {
	wait.UntilWithContext(ctx, d.discover, d.interval)
	return nil
}

func (d *kindDiscoverer) discover(ctx context.Context) {
	log := ctrl.LoggerFrom(ctx).WithName("kind-discovery")
	kinds, err := groupKinds(d.discovery, lockv1alpha1.Group)
	if err != nil {
		log.Error(err, "Cannot discover the kinds of the group", "group", lockv1alpha1.Group)
		return
	}
	for _, gk := range kinds {
		mapping, err := d.kinds.mapping(gk)
		if err != nil {
			log.Error(err, "Cannot map a discovered kind", "kind", gk)
			continue
		}
		if err := d.watches.ensure(mapping.GroupVersionKind); err != nil {
			log.Error(err, "Cannot watch a discovered kind", "kind", gk)
		}
	}
}

// groupKinds returns the namespaced kinds of group that Locks can protect
// and that can be listed, watched and patched, sorted.
func groupKinds(d discovery.DiscoveryInterface, group string) ([]schema.GroupKind, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return nil, fmt.Errorf("listing API groups: %w", err)
	}
	seen := map[schema.GroupKind]bool{}
	for _, g := range groups.Groups {
		if g.Name != group {
			continue
		}
		for _, v := range g.Versions {
			resources, err := d.ServerResourcesForGroupVersion(v.GroupVersion)
			if err != nil {
				return nil, fmt.Errorf("listing the resources of %s: %w", v.GroupVersion, err)
			}
			for _, r := range resources.APIResources {
				if !r.Namespaced || lockv1alpha1.Protectable(schema.GroupKind{Group: group, Kind: r.Kind}) != nil || strings.Contains(r.Name, "/") ||
					!slices.Contains(r.Verbs, "watch") || !slices.Contains(r.Verbs, "patch") {
					continue
				}
				seen[schema.GroupKind{Group: group, Kind: r.Kind}] = true
			}
		}
	}
	kinds := make([]schema.GroupKind, 0, len(seen))
	for gk := range seen {
		kinds = append(kinds, gk)
	}
	slices.SortFunc(kinds, func(a, b schema.GroupKind) int { return strings.Compare(a.Kind, b.Kind) })
	return kinds, nil
}
