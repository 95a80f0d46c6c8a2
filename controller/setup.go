package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/eventnote"
	"github.com/navique/lockguard/internal/readmodel"
)

// Options configure the reconciler.
type Options struct {
	// MaxConcurrentReconciles is the number of workers of the reconciler.
	// Defaults to 4.
	MaxConcurrentReconciles int
	// DiscoveryInterval is how often the core.navique.com group is
	// rediscovered for kinds to watch (and, in cmd/lockguard/manager, to index
	// by owner: readmodel.Discovery). Defaults to
	// readmodel.DefaultDiscoveryInterval.
	DiscoveryInterval time.Duration
	// DisableNamespaceGuard stops keeping HasLocksLabel on namespaces (the
	// chart's guards.namespace.enabled=false, which renders no namespace
	// webhook entry), and a Lock is then active without it. Default false.
	DisableNamespaceGuard bool
	// Pending, when set, tells of Lock creates admitted but not yet in the
	// Lock cache (internal/peers): the replica that admits one puts
	// HasLocksLabel on its namespace before allowing it (webhook/create.go),
	// and the reconciler keeps the label while such a create is pending,
	// so that a namespace is guarded from the moment a Lock's create
	// returns. Default nil: the label follows the cached Locks alone.
	Pending PendingLocks
	// DisableReadOnlyGuard says that lockguard serves no update guard
	// (--read-only-guard=false): a ReadOnly Lock's ReadOnly condition then
	// says GuardDisabled, never InForce. Default false.
	DisableReadOnlyGuard bool
	// DisableClusterLockGuard says that the chart renders no ClusterLock
	// webhook entry (--cluster-lock-guard=false): ClusterLocks then say
	// GuardDisabled, and no target is labelled. Default false.
	DisableClusterLockGuard bool
	// ClusterLabelKeys, when set, are the label keys the cache's transform
	// keeps of cluster-scoped objects (readmodel.CacheTransform): the
	// ClusterLock reconciler sets them to those its live selector
	// ClusterLocks read, so that a label change bringing an object into
	// one brings a pass. Default nil: only creates do.
	ClusterLabelKeys *readmodel.ClusterLabelKeys
	// LabelKeys, when set, are the label keys the cache's transform keeps
	// of namespaced objects (readmodel.LabelKeys): a selector Lock's pass
	// waits while they are being refreshed in its namespace. Default nil:
	// the cache keeps every label.
	LabelKeys *readmodel.LabelKeys
	// Events records the reconciler's Events. Default: the manager's
	// recorder (GetEventRecorder).
	Events events.EventRecorder
}

// PendingLocks tells whether a namespace has Lock creates admitted that
// the Lock cache has not delivered yet.
type PendingLocks interface {
	PendingIn(ns string) bool
}

// +kubebuilder:rbac:groups=core.navique.com,resources=locks,verbs=get;list;watch
// +kubebuilder:rbac:groups=core.navique.com,resources=locks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=core.navique.com,resources=*,verbs=get;list;watch;patch

// maxRetryDelay caps how long a target whose pass failed waits before
// its next pass. The workqueue's default cap is 1000 s: a pass that fails
// while kube-apiserver restarts (each try fails at once with "connection
// refused", and each failure doubles the delay from 5 ms) could otherwise
// leave a Lock's status and its target's annotation stale for minutes
// after the API server is back. A failing pass costs one or two requests,
// and the overall bucket (10/s, burst 100) still bounds the retries.
const maxRetryDelay = 5 * time.Second

// retryLimiter is the reconciler's retry rate limiter: controller-runtime's
// default with the per-item delay capped at maxRetryDelay.
func retryLimiter() workqueue.TypedRateLimiter[item] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[item](5*time.Millisecond, maxRetryDelay),
		&workqueue.TypedBucketRateLimiter[item]{Limiter: rate.NewLimiter(rate.Limit(10), 100)},
	)
}

// requestsOfLock is the map of a Lock event (lockEvents): the Lock's
// request (requestOf), its namespace's label, and, for a selector Lock,
// the objects of its namespace that its selector matches (it covers them,
// or covered them while it was live), so that each gets its annotation.
func (r *reconciler) requestsOfLock(ctx context.Context, l *lockv1alpha1.Lock) []request {
	reqs := []request{requestOf(l)}
	if r.namespaceGuard {
		reqs = append(reqs, request{Namespace: l.Namespace})
	}
	if s := l.Spec.Selector; s != nil && r.watches != nil {
		reqs = append(reqs, r.watches.targetsIn(ctx, l.Namespace, s)...)
	}
	return reqs
}

// Setup adds the reconciler, and the discovery of the kinds it watches, to
// mgr. Both run on the leader only. locks must index the Locks of mgr's
// cache (readmodel.NewLockIndex); kinds are the group's kinds as mgr's API
// server serves them.
func Setup(mgr ctrl.Manager, locks *readmodel.LockIndex, kinds *readmodel.Kinds, opts Options) error {
	if opts.MaxConcurrentReconciles <= 0 {
		opts.MaxConcurrentReconciles = 4
	}
	if opts.Events == nil {
		opts.Events = mgr.GetEventRecorder("lockguard")
	}
	if opts.DiscoveryInterval <= 0 {
		opts.DiscoveryInterval = readmodel.DefaultDiscoveryInterval
	}
	r := &reconciler{
		client: mgr.GetClient(),
		locks:  locks,
		kinds:  kinds,
		events: eventnote.Recorder(opts.Events),

		namespaceGuard: !opts.DisableNamespaceGuard,
		pending:        opts.Pending,
		readOnlyGuard:  !opts.DisableReadOnlyGuard,
		labels:         opts.LabelKeys,
		now:            locks.Now,
	}
	b := builder.TypedControllerManagedBy[item](mgr).
		Named("lock").
		WatchesRawSource(kindSource[*lockv1alpha1.Lock](mgr.GetCache(), &lockv1alpha1.Lock{}, lockEvents{r}))
	if r.namespaceGuard {
		b = b.WatchesRawSource(namespaceSource(mgr, locks))
		inf, err := mgr.GetCache().GetInformer(context.Background(), NamespaceObject(""), cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("getting the Namespace informer: %w", err)
		}
		if s, ok := inf.(namespaceStore); ok {
			r.namespaces = s
		}
	}
	controllerLog := deferValues(mgr.GetLogger().WithValues("controller", "lock"))
	c, err := b.
		WithOptions(controller.TypedOptions[item]{MaxConcurrentReconciles: opts.MaxConcurrentReconciles, RateLimiter: retryLimiter(),
			NewQueue: newPacedQueue(mgr.GetLogger())}).
		WithLogConstructor(func(it *item) logr.Logger {
			// This runs for every pass, and each WithValues copies the
			// logger's encoder with a buffer of 1 KiB (zap): the
			// controller's own value is added once (controllerLog), and
			// the pass's reach zap only when it writes a line
			// (deferValues).
			log := controllerLog
			var k *request
			if it != nil {
				v := it.Value()
				k = &v
			}
			switch {
			case k == nil:
			case k.Namespace != "":
				log = log.WithValues("namespace", k.Namespace)
			case k.Lock != (client.ObjectKey{}):
				log = log.WithValues("lock", k.Lock)
			default:
				log = log.WithValues("kind", k.Target.GroupKind(), "namespace", k.Target.Namespace, "name", k.Target.Name)
			}
			return log
		}).
		Build(r)
	if err != nil {
		return fmt.Errorf("building the controller: %w", err)
	}
	// Target kinds are watched as they are found: the watches need the
	// controller, and the reconciler adds them.
	r.watches = newTargetWatches(mgr.GetCache(), c, locks)

	d := &targetDiscovery{kinds: kinds, watches: r.watches, interval: opts.DiscoveryInterval}
	if err := mgr.Add(d); err != nil {
		return fmt.Errorf("adding kind discovery: %w", err)
	}
	return setupClusterLocks(mgr, r, kinds, opts)
}
