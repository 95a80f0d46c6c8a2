package webhook

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"

	"github.com/navique/lockguard/internal/eventnote"
	"github.com/navique/lockguard/internal/transport"
)

// The options of NewHandler: what the handler is told of the server, its
// metrics and Events, and which guards it runs besides the object guard.

// WithGate makes the handler read reviews within g, the webhook server's
// bounds shared by every path; default: a Gate of its own with the default
// Limits, counting refusals in the handler's Metrics.
func WithGate(g *transport.Gate) Option { return func(h *Handler) { h.gate = g } }

// WithMetrics makes the handler count its decisions in m.
func WithMetrics(m *Metrics) Option { return func(h *Handler) { h.metrics = m } }

// WithEventRecorder makes the handler record a DeleteBlocked Warning Event
// on the target and on each protecting Lock for every denied delete that is
// not a dry run, within EventLimits, its notes truncated to what the API
// server accepts (eventnote.Recorder). The recorder must be asynchronous
// (client-go's is).
func WithEventRecorder(r events.EventRecorder) Option {
	return func(h *Handler) { h.events = eventnote.Recorder(r) }
}

// WithEventLimits sets the limits of the handler's Events; zero fields take
// their defaults.
func WithEventLimits(l EventLimits) Option { return func(h *Handler) { h.eventLimits = l } }

// WithFreshness makes the handler confirm with the API server only the
// deletes of targets whose Locks f says the index may lack. Without it,
// every delete the index would allow is confirmed.
func WithFreshness(f Freshness) Option { return func(h *Handler) { h.locks.fresh = f } }

// WithCascadeGuard makes the handler walk the cascade of every DELETE of a
// core.navique.com object that the object guard allows, over graph, and
// deny (mode Deny) or warn about (Warn) one that would make the garbage
// collector delete a locked object. The Locks come from the handler's
// index, and, when it finds none and the handler confirms allowed
// deletes, from a list of the namespace's Locks read from the API server.
// Mode Off, or a nil graph, leaves cascades unchecked.
func WithCascadeGuard(graph OwnerGraph, mode CascadeMode, limits CascadeLimits) Option {
	return func(h *Handler) { h.cascade = newCascadeGuard(graph, mode, limits) }
}

// WithClusterGuards makes the handler decide the DELETE of Namespaces and
// of core.navique.com CustomResourceDefinitions. The Locks come from
// cache when it finds some that protect an existing object (a cache that
// lags only errs towards denying, as for the object guard), and otherwise
// from the API server, read through NewHandler's reader or, without one,
// through r, a reader of the API server (in lockguard, the manager's
// APIReader, NewHandler's too), which also tells whether their targets
// exist; kinds are mapped through m. cache may be nil: every decision then
// lists the Locks from the API server. Without this option such requests
// are answered Errored: the handler was not configured for what the
// webhook configuration sends it.
func WithClusterGuards(cache CachedLocks, r LockLister, m KindMapper) Option {
	return func(h *Handler) {
		h.locks.cached = cache
		if h.locks.api == nil {
			h.locks.api = newAPILists(r)
		}
		h.cluster = &clusterGuards{api: r, kinds: m, slots: make(chan struct{}, maxClusterDecisions)}
	}
}

// WithServedKinds gives the namespace guard the kinds of the
// core.navique.com group that the API server serves (in lockguard, kind
// discovery's, readmodel.Kinds): a selector Lock without kinds holds a
// namespace while it covers an existing object of one of them. Without
// it, such a Lock holds its namespace whatever it covers. It takes effect
// with WithClusterGuards, given before or after it.
func WithServedKinds(served func() ([]schema.GroupKind, error)) Option {
	return func(h *Handler) { h.served = served }
}

// WithDenialRecorder makes the handler hand every request it refuses
// because of Locks, by any guard, that is not a dry run, to r.
func WithDenialRecorder(r DenialRecorder) Option { return func(h *Handler) { h.denials = r } }
