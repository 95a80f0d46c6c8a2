package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Options configure the reconcilers.
type Options struct {
	// MaxConcurrentReconciles is the number of workers of each reconciler.
	// Defaults to 4.
	MaxConcurrentReconciles int
	// DiscoveryInterval is how often the core.navique.com group is
	// rediscovered for kinds to watch. Defaults to 30s.
	DiscoveryInterval time.Duration
}

// +kubebuilder:rbac:groups=core.navique.com,resources=locks,verbs=get;list;watch
// +kubebuilder:rbac:groups=core.navique.com,resources=locks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=core.navique.com,resources=*,verbs=get;list;watch;patch

// Setup adds the Lock and target reconcilers to mgr. They run on the leader
// only. locks must index the Locks of mgr's cache (NewLockIndex).
func Setup(mgr ctrl.Manager, locks *LockIndex, opts Options) error {
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 4
	}
	if opts.DiscoveryInterval <= 0 {
		opts.DiscoveryInterval = 30 * time.Second
	}
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("creating a discovery client: %w", err)
	}
	watches := &targetWatches{
		cache:   mgr.GetCache(),
		locks:   locks,
		kinds:   newKindResolver(disco),
		watched: map[schema.GroupKind]bool{},
	}

	lockController, err := ctrl.NewControllerManagedBy(mgr).
		Named("lock").
		For(&lockv1alpha1.Lock{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Build(&LockReconciler{client: mgr.GetClient(), watches: watches, events: mgr.GetEventRecorder("lockguard")})
	if err != nil {
		return fmt.Errorf("building the Lock controller: %w", err)
	}

	lockToTarget := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, l *lockv1alpha1.Lock) []lockv1alpha1.TargetKey {
		target, err := l.Target()
		if err != nil {
			return nil
		}
		return []lockv1alpha1.TargetKey{target}
	})
	targetController, err := builder.TypedControllerManagedBy[lockv1alpha1.TargetKey](mgr).
		Named("target").
		WatchesRawSource(source.TypedKind(mgr.GetCache(), &lockv1alpha1.Lock{}, lockToTarget)).
		WithOptions(controller.TypedOptions[lockv1alpha1.TargetKey]{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		WithLogConstructor(func(k *lockv1alpha1.TargetKey) logr.Logger {
			log := mgr.GetLogger().WithValues("controller", "target")
			if k != nil {
				log = log.WithValues("kind", k.GroupKind(), "namespace", k.Namespace, "name", k.Name)
			}
			return log
		}).
		Build(&TargetReconciler{client: mgr.GetClient(), locks: locks, watches: watches})
	if err != nil {
		return fmt.Errorf("building the target controller: %w", err)
	}
	watches.lockController = lockController
	watches.targetController = targetController

	if err := mgr.Add(&kindDiscoverer{discovery: disco, watches: watches, interval: opts.DiscoveryInterval}); err != nil {
		return fmt.Errorf("adding kind discovery: %w", err)
	}
	return nil
}
