package peers

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// Paths of the peer endpoints, on the webhook server.
const (
	SubscribePath = "/peers/subscribe"
	PendingPath   = "/peers/pending"
)

// ProtocolHeader carries the version of the peer protocol on every call
// and answer, ProtocolVersion this replica's: a call of another version is
// refused (version 1, issue 13's, had no authentication).
const (
	ProtocolHeader  = "Lockguard-Peer-Protocol"
	ProtocolVersion = "2"
)

// Bounds of the peer protocol's bodies.
const (
	maxSubscribeRequest = 4 << 10
	maxPendingRequest   = 16 << 10
	// maxSubscribeResponse holds a replay of DefaultMaxMarkers
	// announcements of at most ~1.6 KiB each.
	maxSubscribeResponse = 32 << 20
)

// callTimeout bounds one call to a peer.
const callTimeout = 2 * time.Second

// Source lists the other replicas.
type Source interface {
	// Run calls set with the addresses (host:port) of the other replicas
	// whenever they change, the first time once they are known, until ctx
	// ends.
	Run(ctx context.Context, set func([]string)) error
}

// Reader reads Locks from the API server (in lockguard, the manager's
// APIReader).
type Reader interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
	List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error
}

// Peers runs a replica's side of the protocol: subscriptions to the
// others, the list that makes it warm, the sweep of old markers, the watch
// of the Lock-create entry, the endpoints the others call (ServeHTTP, at
// Paths), and the announcement of the Lock creates the webhook admits
// (AnnounceLock). It is a controller-runtime Runnable on every replica.
type Peers struct {
	t     *Tracker
	o     Config
	src   Source // the other replicas
	api   Reader
	http  *http.Client
	entry *EntryWatch // nil: no watch (tests)

	warm       prometheus.GaugeFunc
	markers    prometheus.GaugeFunc
	confirmed  *prometheus.CounterVec
	refused    prometheus.Counter
	started    sync.Once
	listActive sync.Mutex
}

// newPeers returns the Peers of tracker t as o says, without a Source of
// the other replicas or the watch of the Lock-create entry (New adds
// both). It reads o's Self, TLS, Authenticate, Gate and RenewEvery.
func newPeers(t *Tracker, api Reader, o Config) *Peers {
	if o.RenewEvery <= 0 {
		o.RenewEvery = DefaultRenewEvery
	}
	if o.Gate == nil {
		o.Gate = transport.NewGate(transport.Limits{}, nil)
	}
	p := &Peers{t: t, o: o, api: api,
		http: &http.Client{Timeout: callTimeout, Transport: &http.Transport{TLSClientConfig: o.TLS, MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}}}
	p.warm = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lockguard_replica_warm",
		Help: "1 while this replica decides the deletes its Lock cache would allow from the cache alone (it has heard of every Lock create), 0 while it confirms each with the API server (cold).",
	}, func() float64 {
		if t.Warm() {
			return 1
		}
		return 0
	})
	p.markers = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "lockguard_pending_markers",
		Help: "Lock creates this replica was told about that its Lock cache has not delivered yet; deletes of their targets are confirmed with the API server.",
	}, func() float64 { return float64(t.Markers()) })
	p.confirmed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lockguard_confirmations_total",
		Help: "Decisions the caches could not make alone that were confirmed with the API server, by reason: marker (a Lock create of the target is pending), cold (the replica cannot prove its cache complete), lowered (the cache holds only Locks of the target that protect nothing now, expired or in Audit, which an update it has not seen may have extended or enforced), unsynced (the Lock cache has not synced: the Locks are read from the API server alone), labelled (an update of an object labelled read-only that no cached Lock freezes), owners (the owner index has not synced: an owner's cascade is walked over its namespace as the API server lists it), exception (a request enforcing Locks refuse, for which the cache holds no LockException that lets it through: the namespace's exceptions are read from the API server).",
	}, []string{"reason"})
	p.refused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "lockguard_lock_creates_refused_total",
		Help: "Lock creates refused because a replica could not be told about them (retryable).",
	})
	return p
}

// register registers the metrics with r.
func (p *Peers) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{p.warm, p.markers, p.confirmed, p.refused} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	p.confirmed.WithLabelValues(ReasonMarker)
	p.confirmed.WithLabelValues(ReasonCold)
	return nil
}

// MayLack is the webhook's question (webhook.Freshness): Tracker.MayLack.
func (p *Peers) MayLack(key lockv1alpha1.TargetKey) (string, bool) { return p.t.MayLack(key) }

// MayLackIn reports whether the cache may lack a live Lock of anything in
// namespace ns (Tracker.MayLackIn): webhook.NamespaceFreshness.
func (p *Peers) MayLackIn(ns string) bool { return p.t.MayLackIn(ns) }

// PendingCreate reports whether a Lock create of key is pending on this
// replica (Tracker.PendingCreate): webhook.PendingCreates.
func (p *Peers) PendingCreate(key lockv1alpha1.TargetKey) bool { return p.t.PendingCreate(key) }

// PendingIn reports whether a Lock create in namespace ns is pending on
// this replica (Tracker.PendingIn).
func (p *Peers) PendingIn(ns string) bool { return p.t.PendingIn(ns) }

// Admitting is the readiness check "peers": an error while this replica
// cannot admit Lock creates on its own account (Tracker.Admitting: it
// does not know its peers yet, or its identity Lease is not fresh).
func (p *Peers) Admitting(*http.Request) error { return p.t.Admitting() }

// Confirmed counts a confirmation for reason.
func (p *Peers) Confirmed(reason string) { p.confirmed.WithLabelValues(reason).Inc() }

// NeedLeaderElection is false: every replica serves the webhook.
func (p *Peers) NeedLeaderElection() bool { return false }

// Start runs the protocol until ctx ends: the watch of the Lock-create
// entry, renewals on their own schedule (a long list must not delay them
// past Trust), and the list and the sweep of old markers.
func (p *Peers) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var entry sync.WaitGroup
	defer entry.Wait()
	defer cancel()
	if p.entry != nil {
		entry.Add(1)
		go func() {
			defer entry.Done()
			_ = p.entry.Start(ctx)
		}()
	}
	log := ctrl.LoggerFrom(ctx).WithName("peers")
	ctx = ctrl.LoggerInto(ctx, log)
	errs := make(chan error, 1)
	go func() { errs <- p.src.Run(ctx, p.t.SetView) }()
	go p.renewLoop(ctx)
	tick := time.NewTicker(p.o.RenewEvery)
	defer tick.Stop()
	wasWarm := false
	for {
		if p.t.NeedsList() {
			p.list(ctx)
		}
		p.sweep(ctx)
		if warm := p.t.Warm(); warm != wasWarm {
			log.Info("Replica state changed", "warm", warm)
			wasWarm = warm
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("watching the other replicas: %w", err)
			}
			<-ctx.Done()
			return nil
		case <-tick.C:
		}
	}
}
