package manager

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

// LeaderElectionID is the name of the Lease the reconciler's leader holds.
const LeaderElectionID = "lockguard.core.navique.com"

// CacheSyncTimeout is how long the leader's controllers wait for their
// caches to sync before they, and with them the process, give up.
// controller-runtime's default, 2 minutes, was too short at 100,000 Locks
// and 1,000,000 Stacks (bench-scale on 2026-12-05, kube-apiserver listing
// the Stacks from etcd): the process exited, and would have again on each
// restart. The webhook does not wait for these caches (it reads the API
// server until they sync), and a cache that cannot sync (lockguard lacks a
// permission) is in the log all along.
const CacheSyncTimeout = 30 * time.Minute

// DefaultQPS and DefaultBurst are the client rate limits lockguard runs
// with unless its flags say otherwise (--kube-api-qps, --kube-api-burst):
// per resource, each resource's client having its own. A selector Lock's
// create labels up to 500 objects within the webhook's timeout
// (docs/optin.md): the burst takes them at once.
const (
	DefaultQPS   = 500
	DefaultBurst = 1000
)

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

	// ProtectResources are the resources of other groups that Locks can
	// protect (docs/contract.md rule 21; --protect-resource, the chart's
	// protect.resources). New resolves them to kinds with discovery and
	// refuses to build a manager when one cannot be protected. The kinds
	// are process-wide (lockv1alpha1.SetOptedIn): an empty list leaves
	// what an earlier manager of the process set.
	ProtectResources []schema.GroupResource

	// DisableReadOnlyGuard leaves the update guard of ReadOnly Locks
	// (webhook.UpdatePath) unserved: the chart's guards.readOnly.enabled
	// false, which renders no update entry. Default false: it is served.
	DisableReadOnlyGuard bool
	// DisableClusterLockGuard serves no ClusterLock guard
	// (webhook.ClusterLockPath, ClusterLabelPath, ClusterCreatePath) and tells the reconciler
	// so: ClusterLocks then say GuardDisabled (--cluster-lock-guard=false,
	// when the chart renders no ClusterLock entry).
	DisableClusterLockGuard bool
	// ReadOnlyExempt are the principals whose updates ReadOnly Locks never
	// refuse, besides lockguard itself (learned at start with a
	// SelfSubjectReview); their Self is set by New.
	ReadOnlyExempt webhook.Exemptions
	// ExceptionsBesidePolicy says that the chart's ValidatingAdmissionPolicy
	// runs beside the webhook (mode both): a LockException create is then
	// allowed with a warning that the policy ignores exceptions
	// (webhook.PolicyWarning).
	ExceptionsBesidePolicy bool

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
