package webhook

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"

	"github.com/navique/lockguard/internal/transport"
)

// Config is what NewHandler builds a Handler from: where it reads Locks,
// what it is told of the server, its metrics and Events, and which guards
// it runs besides the object guard. Zero fields take their defaults.
type Config struct {
	// Locks is the Lock cache every guard reads (in lockguard,
	// readmodel.LockIndex); nil: none, and the deletes of targets are
	// answered Errored (the namespace and CRD guards read the API
	// server's Locks alone).
	Locks Locks
	// Live reads the API server (in lockguard, the manager's APIReader):
	// the deletes Locks would allow are confirmed by listing the
	// namespace's Locks through it. nil: Locks alone decides the deletes
	// of targets (lockguard's --cache-only-decisions).
	Live LockLister
	// Freshness makes the handler confirm with the API server only the
	// deletes of targets whose Locks it says Locks may lack; nil: every
	// delete Locks would allow is confirmed.
	Freshness Freshness
	// Gate bounds the reading of reviews, the webhook server's bounds
	// shared by every path; nil: a Gate of its own with the default
	// Limits, counting refusals in Metrics.
	Gate *transport.Gate
	// Metrics counts the handler's decisions; nil: none are counted.
	Metrics *Metrics
	// Events records a Warning Event on the target and on each refusing
	// Lock (or ClusterLock, in the ClusterLockHandler built on the
	// Handler) for every refused request that is not a dry run, within
	// EventLimits, its notes truncated to what the API server accepts
	// (eventnote.Recorder). It must be asynchronous (client-go's is);
	// nil: no Events.
	Events events.EventRecorder
	// EventLimits are the limits of Events; zero fields take their
	// defaults.
	EventLimits EventLimits
	// Denials is handed every request Locks or ClusterLocks refuse, by
	// any guard (the ClusterLock guards' too: NewClusterLockHandler), that
	// is not a dry run; nil: lastDenied is not recorded.
	Denials DenialRecorder
	// WouldDeny is handed every request that audit Locks (or audit
	// ClusterLocks) would refuse and none refuses, by any guard, that is
	// not a dry run; nil: lastWouldDeny is not recorded.
	WouldDeny DenialRecorder
	// Exceptions make the object and update guards honour LockExceptions
	// (docs/contract.md rule 20); nil: none lets anything through.
	Exceptions *ExceptionConfig
	// Cascade configures the cascade guard; its zero value walks no
	// cascade.
	Cascade CascadeConfig
	// Cluster configures the namespace and CRD guards; nil: such deletes
	// are answered Errored (the handler was not configured for what the
	// webhook configuration sends it).
	Cluster *ClusterConfig
	// Now is the clock a Lock is live by (Lock.Live: docs/contract.md
	// rule 19, a Lock past its expiresAt protects nothing). It must be
	// the clock Locks keeps its Locks by (in lockguard,
	// readmodel.LockIndex.Now), so that the cache's Locks and the API
	// server's are kept alike. nil: time.Now.
	Now func() time.Time
}

// CascadeConfig makes the handler walk the cascade of every DELETE of a
// core.navique.com object that the object guard allows, over Graph, and
// deny (Mode Deny) or warn about (Warn) one that would make the garbage
// collector delete a locked object. The Locks come from the handler's
// cache, and, when it finds none and the handler confirms allowed
// deletes, from a list of the namespace's Locks read from the API server.
// Mode Off (or ""), or a nil Graph, leaves cascades unchecked.
type CascadeConfig struct {
	Graph  OwnerGraph
	Mode   CascadeMode
	Limits CascadeLimits
	// API reads the API server (in lockguard, the manager's APIReader):
	// while Graph cannot answer (its caches have not synced, as in a
	// replica that just started), the cascade is walked over the owner's
	// namespace as listed through it, of the kinds Kinds lists (counted
	// under ReasonOwners), and a list that fails refuses the delete
	// (cascadelisted.go). nil, or a nil Kinds: such a cascade is allowed
	// with a warning (IncompleteUnsynced).
	API LockLister
	// Kinds lists the kinds Graph holds once it has synced, in the
	// version to list them in (in lockguard, the group's kinds that kind
	// discovery serves and the owner index watches:
	// readmodel.ServedKind.Watched).
	Kinds func() ([]schema.GroupVersionKind, error)
}

// ClusterConfig makes the handler decide the DELETE of Namespaces and of
// core.navique.com CustomResourceDefinitions. The Locks come from the
// handler's cache when it finds some that protect an existing object (a
// cache that lags only errs towards denying, as for the object guard),
// and otherwise from the API server, read through Config.Live or, without
// one, through API.
type ClusterConfig struct {
	// API reads the API server (in lockguard, the manager's APIReader,
	// Config.Live's too): the targets' existence, and the Locks.
	API LockLister
	// Kinds maps kinds to resources (in lockguard, the manager's
	// RESTMapper).
	Kinds KindMapper
	// Served lists the kinds of the core.navique.com group that the API
	// server serves (in lockguard, kind discovery's, readmodel.Kinds): a
	// selector Lock without kinds holds a namespace while it covers an
	// existing object of one of them. nil: such a Lock holds its
	// namespace whatever it covers.
	Served func() ([]schema.GroupKind, error)
}
