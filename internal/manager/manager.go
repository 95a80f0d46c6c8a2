// Package manager wires lockguard: the Lock cache and its index by target,
// the admission webhook served by every replica, and the reconciler that
// runs on the leader. cmd/lockguard parses flags into Options; tests build
// the same manager in-process.
package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/internal/denials"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

// LeaderElectionID is the name of the Lease the reconciler's leader holds.
const LeaderElectionID = "lockguard.core.navique.com"

// Options configure a lockguard manager. The zero value of each field is
// its default, except where noted.
type Options struct {
	// WebhookHost is the address the webhook server binds to. Default: all.
	WebhookHost string
	// WebhookPort is the webhook server's port. Required (9443 in the binary).
	WebhookPort int
	// CertDir holds tls.crt and tls.key of the webhook server, reloaded
	// when they change. Required.
	CertDir string
	// EnableHTTP2 serves HTTP/2 on the webhook server. Default false.
	EnableHTTP2 bool
	// WebhookLimits bound the requests the webhook server serves at once,
	// on every path together, and the bytes their bodies hold; zero fields
	// take transport's defaults.
	WebhookLimits transport.Limits
	// WebhookConnections bound the connections the webhook server holds
	// at once, in all and per source address; zero: transport's defaults.
	WebhookConnections transport.ConnectionLimits
	// ReviewCallers require a client certificate of the review paths'
	// caller (ReviewCallerOptions); zero: off.
	ReviewCallers ReviewCallerOptions

	// MetricsAddr is the metrics endpoint's address; "0" disables it.
	// Default "0".
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS with authentication and
	// authorization (TokenReview and SubjectAccessReview). Default false.
	MetricsSecure bool
	// MetricsCertDir holds tls.crt and tls.key for the metrics endpoint;
	// empty means a self-signed certificate generated at start.
	MetricsCertDir string

	// ProbeAddr is the address of /healthz and /readyz; "0" disables them.
	// Default "0".
	ProbeAddr string

	// PprofAddr is the address of net/http/pprof's /debug/pprof/ endpoints
	// (no authentication: bind it to loopback); "0" or empty disables them.
	PprofAddr string

	// LeaderElection makes the reconciler run on the leader only.
	LeaderElection bool
	// LeaderElectionNamespace holds the Lease; required out of cluster.
	LeaderElectionNamespace string
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election;
	// zero values take controller-runtime's defaults (15s, 10s, 2s).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration

	// Controller configures the reconciler.
	Controller controller.Options

	// CacheOnlyDecisions makes the webhook decide from the Lock cache alone,
	// without confirming with the API server the deletes the cache would
	// allow. Allowed deletes then cost no API call, but a delete sent
	// milliseconds after a Lock's create may get through (the cache lags
	// the API server). Default false: allowed deletes are confirmed with a
	// consistent list of the namespace's Locks, which costs up to about
	// 100ms under write load (the API server's watch-cache freshness wait).
	CacheOnlyDecisions bool

	// CascadeGuard is what the webhook does with the DELETE of an owner
	// whose cascade would delete a locked object (docs/contract.md rule 6):
	// webhook.CascadeDeny (the default, for ""), CascadeWarn or CascadeOff.
	// Except with Off, every replica keeps metadata caches of the group's
	// kinds, indexed by owner (readmodel.OwnerIndex).
	CascadeGuard webhook.CascadeMode

	// Peers configure the peer protocol (PeerOptions); zero: off, every
	// delete the cache would allow is confirmed with the API server.
	Peers PeerOptions
	// CreateEntry names lockguard's webhook configuration, whose
	// Lock-create entry the peer protocol requires (CreateEntryOptions).
	CreateEntry CreateEntryOptions

	// DisableReadOnlyGuard leaves the update guard of ReadOnly Locks
	// (webhook.UpdatePath) unserved: the chart's guards.readOnly.enabled
	// false, which renders no update entry. Default false: it is served.
	DisableReadOnlyGuard bool
	// ReadOnlyExempt are the principals whose updates ReadOnly Locks never
	// refuse, besides lockguard itself (learned at start with a
	// SelfSubjectReview); their Self is set by New.
	ReadOnlyExempt webhook.Exemptions

	// DenialFlushInterval is how often, at most, this replica writes the
	// status.lastDenied of one Lock (internal/denials): the refusals in
	// between are added to the count of the next write. Default
	// denials.DefaultInterval (5s).
	DenialFlushInterval time.Duration

	// Registerer receives lockguard's own metrics. Default: controller-runtime's
	// registry, which the metrics endpoint serves.
	Registerer prometheus.Registerer

	// GracefulShutdownTimeout bounds how long runnables get to stop.
	// Default 30s.
	GracefulShutdownTimeout time.Duration
}

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

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache: cache.Options{
			// Only what the webhook and the reconciler read is cached.
			DefaultTransform: readmodel.CacheTransform(),
			// Lists and watches that ride out an API server restart.
			NewInformer: readmodel.NewInformer,
		},
		WebhookServer: transport.NewServer(transport.ServerOptions{
			Host:        o.WebhookHost,
			Port:        o.WebhookPort,
			TLSOpts:     append(tlsOpts, certs.WithCertificate(certWatcher)),
			Connections: o.WebhookConnections,
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
	reg := o.Registerer
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	handlerMetrics := webhook.NewMetrics()
	if err := handlerMetrics.Register(reg); err != nil {
		return nil, fmt.Errorf("registering the webhook metrics: %w", err)
	}
	for _, c := range []prometheus.Collector{controller.NewLockStateCollector(locks), certs.NewExpiryCollector(certWatcher)} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering metrics: %w", err)
		}
	}
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
	hc := webhook.Config{Locks: locks, Live: live, Metrics: handlerMetrics, Gate: gate, Events: mgr.GetEventRecorder("lockguard"), Denials: recorder,
		Cluster: &webhook.ClusterConfig{API: mgr.GetAPIReader(), Kinds: mgr.GetRESTMapper(), Served: servedKinds(kinds, o.Controller.DiscoveryInterval)}}
	// The cascade guard walks owner references over metadata caches that
	// every replica keeps, fed by kind discovery on every replica.
	if o.CascadeGuard != webhook.CascadeOff {
		mode := o.CascadeGuard
		if mode == "" {
			mode = webhook.CascadeDeny
		}
		owners := readmodel.NewOwnerIndex(mgr.GetCache())
		d := readmodel.NewDiscovery(kinds, owners, o.Controller.DiscoveryInterval)
		if err := d.IndexOwners(ctx, mgr.GetAPIReader()); err != nil {
			mgr.GetLogger().WithName("kind-discovery").Info("Cannot index some of the group's kinds by owner before the start; discovery will", "error", err.Error())
		}
		if err := mgr.Add(d); err != nil {
			return nil, fmt.Errorf("adding kind discovery: %w", err)
		}
		hc.Cascade = webhook.CascadeConfig{Graph: owners, Mode: mode}
		if err := mgr.AddReadyzCheck("owner-index", ownerIndexReady(owners, time.Now(), ownerIndexGrace)); err != nil {
			return nil, err
		}
	}
	// With the peer protocol, only the deletes whose Locks the cache may
	// lack are confirmed (internal/peers says why that is strict), and
	// every Lock create is announced to the other replicas.
	p, err := setupPeers(mgr, cfg, locks, certWatcher, gate, reg, o)
	if err != nil {
		return nil, err
	}
	creates := webhook.CreateOptions{Gate: gate}
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
	handler := webhook.NewHandler(hc)
	// The Handler serves HTTP itself: unlike admission.Webhook, it does not
	// copy the object being deleted out of the request body.
	mgr.GetWebhookServer().Register(webhook.Path, review(handler))
	mgr.GetWebhookServer().Register(webhook.CreatePath, review(webhook.NewCreateHandler(creates)))
	if !o.DisableReadOnlyGuard {
		// lockguard's own writes are exempt once it knows who it is.
		self := &selfIdentity{client: mgr.GetClient()}
		if err := mgr.Add(self); err != nil {
			return nil, fmt.Errorf("adding the self identity: %w", err)
		}
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
	if err := mgr.AddReadyzCheck("lock-cache", func(*http.Request) error {
		if !locks.HasSynced() {
			return errors.New("the Lock cache has not synced")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return nil, err
	}
	return mgr, nil
}

// ownerIndexGrace is how long after its start a replica waits, before it
// reports ready, for its owner index to sync: a cascade walked before then
// is allowed with a warning (the object guard still denies the collector's
// delete of a locked object), and a kind whose cache never syncs must not
// keep the webhook, and so every delete of the group, down.
const ownerIndexGrace = time.Minute

// ownerIndexReady is the readiness check of the owner index: ready once it
// has synced, or once grace has passed since start, whichever is first;
// then ready for good.
func ownerIndexReady(owners *readmodel.OwnerIndex, start time.Time, grace time.Duration) healthz.Checker {
	var ready atomic.Bool
	return func(*http.Request) error {
		if ready.Load() || owners.HasSynced() || time.Since(start) > grace {
			ready.Store(true)
			return nil
		}
		return errors.New("the owner index (the cascade guard's metadata caches) has not synced")
	}
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

// servedKinds lists the namespaced kinds of the group that discovery served
// within the last interval (readmodel.Kinds.Recent), for the namespace
// guard's selector Locks (webhook.ClusterConfig.Served).
func servedKinds(kinds *readmodel.Kinds, interval time.Duration) func() ([]schema.GroupKind, error) {
	if interval <= 0 {
		interval = readmodel.DefaultDiscoveryInterval
	}
	return func() ([]schema.GroupKind, error) {
		served, err := kinds.Recent(interval)
		if err != nil {
			return nil, err
		}
		var out []schema.GroupKind
		for _, k := range served {
			if k.Namespaced {
				out = append(out, k.GVK.GroupKind())
			}
		}
		return out, nil
	}
}
