// Package manager wires lockguard: the Lock cache and its index by target,
// the admission webhook served by every replica, and the reconciler that
// runs on the leader. It is the composition root, under cmd/lockguard
// rather than internal/: it imports webhook/ and controller/, and nothing
// under internal/ imports them (docs/development.md, Layout).
// cmd/lockguard parses flags into Options; tests (e2e/framework) build the
// same manager in-process.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/internal/denials"
	"github.com/navique/lockguard/internal/metaslim"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

// NewScheme returns the scheme lockguard uses: client-go's types and Locks.
func NewScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}

// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
// +kubebuilder:rbac:groups=core.navique.com,resources=lockexceptions,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=lockguard-system,resources=leases,verbs=get;list;watch;create;update;patch;delete

// New builds a lockguard manager for the API server of cfg. Start it with
// Start; it stops when the context is cancelled.
func New(ctx context.Context, cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if o.CertDir == "" {
		return nil, errors.New("a certificate directory for the webhook server is required")
	}
	if o.WebhookPort <= 0 {
		return nil, fmt.Errorf("webhook port %d is not a valid port", o.WebhookPort)
	}
	scheme, err := NewScheme()
	if err != nil {
		return nil, err
	}
	certWatcher, err := certs.NewWatcher(o.CertDir)
	if err != nil {
		return nil, err
	}
	review, err := o.ReviewCallers.wrapper()
	if err != nil {
		return nil, err
	}
	// Client certificates are asked for, never required: the other
	// replicas present theirs on the peer paths (verified there).
	tlsOpts := []func(*tls.Config){certs.ServerTLS(o.EnableHTTP2), certs.RequestClientCertificates()}

	metricsOpts := metricsserver.Options{
		BindAddress:   orDefault(o.MetricsAddr, "0"),
		SecureServing: o.MetricsSecure,
		TLSOpts:       []func(*tls.Config){certs.ServerTLS(false)},
		CertDir:       o.MetricsCertDir,
	}
	if o.MetricsSecure {
		metricsOpts.FilterProvider = metricsAuth
	}
	shutdown := o.GracefulShutdownTimeout
	if shutdown == 0 {
		shutdown = 30 * time.Second
	}

	handlerMetrics := webhook.NewMetrics()
	// The labels of cluster-scoped objects that live selector ClusterLocks
	// read: the leader's ClusterLock reconciler sets them, the cache keeps
	// them (and no other label of those objects).
	clusterKeys := &readmodel.ClusterLabelKeys{}
	// The labels of namespaced objects that selector Locks read: the
	// Locks' own transform adds them, the cache keeps them (and
	// lockguard's own labels, no other).
	labelKeys := readmodel.NewLabelKeys()
	transform := readmodel.CacheTransform(clusterKeys, labelKeys)
	// The webhook's transport holds what the caches leave under GOMEMLIMIT.
	o.WebhookLimits.Memory = transport.NewMemory(ctx)
	o.WebhookConnections.Memory = o.WebhookLimits.Memory
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating the HTTP client: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			// The cache's metadata-only lists and watches come without
			// what its transform would drop (managedFields above all):
			// client-go decodes less, and makes less garbage, at start.
			HTTPClient: metaslim.Wrap(httpClient),
			// Only what the webhook and the reconciler read is cached.
			DefaultTransform: transform,
			// Lists and watches that ride out an API server restart,
			// lists read and transformed a page at a time.
			NewInformer: readmodel.NewInformerFunc(transform, labelKeys),
		},
		WebhookServer: transport.NewServer(transport.ServerOptions{
			Host: o.WebhookHost, Port: o.WebhookPort,
			TLSOpts:     append(tlsOpts, certs.WithCertificate(certWatcher)),
			Connections: o.WebhookConnections,
			Closed:      handlerMetrics.ConnectionClosed,
		}),
		Metrics:                       metricsOpts,
		HealthProbeBindAddress:        orDefault(o.ProbeAddr, "0"),
		PprofBindAddress:              orDefault(o.PprofAddr, "0"),
		LeaderElection:                o.LeaderElection,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(o.LeaseDuration),
		RenewDeadline:                 nonZero(o.RenewDeadline),
		RetryPeriod:                   nonZero(o.RetryPeriod),
		GracefulShutdownTimeout:       &shutdown,
		Controller:                    config.Controller{CacheSyncTimeout: CacheSyncTimeout},
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.Add(certWatcher); err != nil {
		return nil, err
	}

	locks, err := readmodel.NewLockIndex(ctx, mgr.GetCache())
	if err != nil {
		return nil, err
	}
	disco, err := discovery.NewDiscoveryClientForConfig(mgr.GetConfig())
	if err != nil {
		return nil, fmt.Errorf("creating a discovery client: %w", err)
	}
	kinds := readmodel.NewKinds(disco)
	if len(o.ProtectResources) > 0 {
		if err := optIn(disco, kinds, o.ProtectResources); err != nil {
			return nil, err
		}
	}
	reg := o.Registerer
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	if err := handlerMetrics.Register(reg); err != nil {
		return nil, fmt.Errorf("registering the webhook metrics: %w", err)
	}
	for _, c := range []prometheus.Collector{controller.NewLockStateCollector(locks), certs.NewExpiryCollector(certWatcher)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
	// Every Event lockguard records goes through one recorder, which
	// writes none to a namespace that is gone or terminating.
	events, err := newEventRecorder(ctx, mgr, !o.Controller.DisableNamespaceGuard)
	if err != nil {
		return nil, err
	}
	o.Controller.Events = events
	// The webhook confirms with the API server what the cache would allow:
	// the cache may not have seen a Lock created a moment ago.
	var live webhook.LockLister = mgr.GetAPIReader()
	if o.CacheOnlyDecisions {
		live = nil
	}
	// The namespace and CRD guards deny from the cache's Locks, and read
	// the targets, and the Locks of what they would allow, from the API
	// server, whatever --cache-only-decisions says: such deletes are rare,
	// and remove objects without asking admission about each.
	// One Gate bounds every path of the webhook server together.
	gate := transport.NewGate(o.WebhookLimits, handlerMetrics.Refused)
	// Every replica writes the lastDenied of the refusals it decided,
	// asynchronously: Locks from the cache, again from the API server
	// after a conflict.
	denialMetrics := denials.NewMetrics()
	if err := denialMetrics.Register(reg); err != nil {
		return nil, fmt.Errorf("registering the denial metrics: %w", err)
	}
	recorder := denials.New(mgr.GetClient(), mgr.GetAPIReader(), denials.Options{Interval: o.DenialFlushInterval, Metrics: denialMetrics})
	if err := mgr.Add(recorder); err != nil {
		return nil, fmt.Errorf("adding the denial recorder: %w", err)
	}
	// The requests audit Locks would refuse go to their lastWouldDeny, the
	// same way (docs/contract.md rule 20).
	wouldDeny := denials.New(mgr.GetClient(), mgr.GetAPIReader(), denials.Options{Interval: o.DenialFlushInterval, WouldDeny: true})
	if err := mgr.Add(wouldDeny); err != nil {
		return nil, fmt.Errorf("adding the would-deny recorder: %w", err)
	}
	// The uses of LockExceptions go to the pierced Locks' lastException,
	// the same way (docs/contract.md rule 20); the exceptions are read
	// from an informer, started with the cache.
	uses := denials.New(mgr.GetClient(), mgr.GetAPIReader(), denials.Options{Interval: o.DenialFlushInterval, Exceptions: true})
	if err := mgr.Add(uses); err != nil {
		return nil, fmt.Errorf("adding the exception-use recorder: %w", err)
	}
	if _, err := mgr.GetCache().GetInformer(ctx, &lockv1alpha1.LockException{}); err != nil {
		// Read lazily, then: until it can be, no exception lets anything through.
		mgr.GetLogger().Info("Cannot watch LockExceptions yet (is their CRD installed?)", "error", err.Error())
	}
	// One clock for every path (docs/contract.md rule 19): the index's
	// reads, the guards' reads of the API server, Lock creates and the
	// reconciler all tell an expired Lock by locks.Now.
	hc := webhook.Config{Locks: locks, Live: live, Now: locks.Now, Metrics: handlerMetrics, Gate: gate, Events: events, Denials: recorder, WouldDeny: wouldDeny,
		Cluster:    &webhook.ClusterConfig{API: mgr.GetAPIReader(), Kinds: mgr.GetRESTMapper(), Served: servedKinds(kinds, o.Controller.DiscoveryInterval)},
		Exceptions: &webhook.ExceptionConfig{Cache: mgr.GetCache(), API: mgr.GetAPIReader(), Uses: uses}}
	// The cascade guard walks owner references over metadata caches that
	// every replica keeps, fed by kind discovery on every replica once the
	// manager runs. Until they have synced (seconds to a minute at scale),
	// it walks the owner's namespace as the API server lists it: no
	// readiness check waits for them.
	if o.CascadeGuard != webhook.CascadeOff {
		mode := o.CascadeGuard
		if mode == "" {
			mode = webhook.CascadeDeny
		}
		owners := readmodel.NewOwnerIndex(mgr.GetCache(), labelKeys)
		d := readmodel.NewDiscovery(kinds, owners, o.Controller.DiscoveryInterval)
		if err := mgr.Add(d); err != nil {
			return nil, fmt.Errorf("adding kind discovery: %w", err)
		}
		hc.Cascade = webhook.CascadeConfig{Graph: owners, Mode: mode, API: mgr.GetAPIReader(), Kinds: watchedKinds(kinds, o.Controller.DiscoveryInterval)}
	}
	// With the peer protocol, only the deletes whose Locks the cache may
	// lack are confirmed (internal/peers says why that is strict), and
	// every Lock create is announced to the other replicas.
	p, err := setupPeers(mgr, cfg, locks, certWatcher, gate, reg, o)
	if err != nil {
		return nil, err
	}
	creates := webhook.CreateOptions{Gate: gate, Now: locks.Now, Metrics: handlerMetrics}
	if p != nil {
		hc.Freshness = p
		o.Controller.Pending = p
		creates.Announcer = p
	}
	if !o.Controller.DisableNamespaceGuard {
		// The namespace guard's label goes on before a Lock create is
		// allowed; the reconciler keeps it (while the create is pending,
		// with the peer protocol).
		creates.Labeler = webhook.NamespaceLabel(mgr.GetClient())
	}
	if len(o.ProtectResources) > 0 {
		// An opted-in target's protected label goes on before its Lock's
		// create is allowed (the chart's protect-locked entry selects on
		// it); the reconciler keeps it. So do the objects a selector Lock
		// covers, listed live (at most webhook.SelectorLabelCap).
		creates.Targets = webhook.ProtectedTargetLabel(optedInKind(kinds), mgr.GetClient())
		creates.Selected = webhook.OptedInObjects(optedInKind(kinds), mgr.GetAPIReader())
	}
	handler := webhook.NewHandler(hc)
	// The Handler serves HTTP itself: unlike admission.Webhook, it does not
	// copy the object being deleted out of the request body.
	mgr.GetWebhookServer().Register(webhook.Path, review(handler))
	mgr.GetWebhookServer().Register(webhook.CreatePath, review(webhook.NewCreateHandler(creates)))
	// Lifting a Lock without the unlock verb (the chart's entry before 1.30,
	// docs/contract.md rule 18): served whatever the flags, as the entry may
	// be rendered whatever they say.
	mgr.GetWebhookServer().Register(webhook.UnlockPath, review(webhook.NewUnlockHandler(gate)))
	// Creating a LockException needs break-glass on its Locks (rule 20).
	mgr.GetWebhookServer().Register(webhook.ExceptionPath, review(webhook.NewExceptionHandler(webhook.ExceptionOptions{
		Gate: gate, Reviews: mgr.GetClient(), Now: locks.Now, BesidePolicy: o.ExceptionsBesidePolicy})))
	// lockguard's own writes are exempt once it knows who it is.
	self := &selfIdentity{client: mgr.GetClient()}
	if err := mgr.Add(self); err != nil {
		return nil, fmt.Errorf("adding the self identity: %w", err)
	}
	if !o.DisableClusterLockGuard {
		// The ClusterLock guard (docs/contract.md rule 22): the deletes of
		// cluster-locked objects, and the removal of their label.
		if _, err := mgr.GetCache().GetInformer(ctx, &lockv1alpha1.ClusterLock{}, cache.BlockUntilSynced(false)); err != nil {
			// Read lazily, then, and from the API server until then.
			mgr.GetLogger().Info("Cannot watch ClusterLocks yet (is their CRD installed?)", "error", err.Error())
		}
		clc := webhook.ClusterLockConfig{Cache: mgr.GetCache(), API: mgr.GetAPIReader(), Now: locks.Now, Self: self.Username,
			Labeler: webhook.ClusterLabel(mgr.GetRESTMapper(), mgr.GetClient(), mgr.GetAPIReader())}
		if !o.DisableReadOnlyGuard {
			// ReadOnly ClusterLocks (rules 16 and 22): the chart's
			// cluster-update entry, with both guards on.
			exempt := o.ReadOnlyExempt
			exempt.Self = self.Username
			clc.Exempt = &exempt
		}
		cl := webhook.NewClusterLockHandler(handler, clc)
		mgr.GetWebhookServer().Register(webhook.ClusterLockPath, review(cl.DeleteHandler()))
		mgr.GetWebhookServer().Register(webhook.ClusterLabelPath, review(cl.LabelHandler()))
		// A ClusterLock's create labels its target first (rule 22).
		mgr.GetWebhookServer().Register(webhook.ClusterCreatePath, review(cl.CreateHandler()))
		if clc.Exempt != nil {
			mgr.GetWebhookServer().Register(webhook.ClusterUpdatePath, review(cl.ClusterUpdateHandler()))
		}
	}
	o.Controller.DisableClusterLockGuard = o.DisableClusterLockGuard
	o.Controller.ClusterLabelKeys = clusterKeys
	o.Controller.LabelKeys = labelKeys
	if !o.DisableReadOnlyGuard {
		exempt := o.ReadOnlyExempt
		exempt.Self = self.Username
		mgr.GetWebhookServer().Register(webhook.UpdatePath, review(webhook.NewUpdateHandler(handler, exempt, apiParents{mapper: mgr.GetRESTMapper(), reader: mgr.GetAPIReader()})))
	}
	// The status says GuardDisabled, never InForce, when no update guard
	// serves.
	o.Controller.DisableReadOnlyGuard = o.DisableReadOnlyGuard
	if err := controller.Setup(mgr, locks, kinds, o.Controller); err != nil {
		return nil, err
	}

	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("lock-reads", lockReadsReady(locks.HasSynced, live)); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	if p != nil {
		// A ready replica admits Lock creates (those of its own that the
		// peer protocol allows): it knows its peers.
		if err := mgr.AddReadyzCheck("peers", p.Admitting); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// nonZero returns nil for 0, so that the manager takes its default.
func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
