package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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

// apiTimeout bounds each read of the API server by the peer loop (a page
// of the list that makes a replica warm, a GET of the sweep), so that a
// stuck read never stops the loop.
const apiTimeout = 30 * time.Second

// maxSweep bounds the quorum GETs of one sweep of old markers.
const maxSweep = 200

// listPageSize is the page size of the list of all Locks a replica makes
// before it is warm.
const listPageSize = 500

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
		Help: "Deletes the Lock cache would allow that were confirmed with the API server, by reason: marker (a Lock create of the target is pending), cold (the replica cannot prove its cache complete).",
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

// PendingCreate reports whether a Lock create of key is pending on this
// replica (Tracker.PendingCreate): webhook.PendingCreates.
func (p *Peers) PendingCreate(key lockv1alpha1.TargetKey) bool { return p.t.PendingCreate(key) }

// PendingIn reports whether a Lock create in namespace ns is pending on
// this replica (Tracker.PendingIn).
func (p *Peers) PendingIn(ns string) bool { return p.t.PendingIn(ns) }

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

// renewLoop renews the subscriptions every RenewEvery until ctx ends.
func (p *Peers) renewLoop(ctx context.Context) {
	failing := map[string]bool{}
	var mu sync.Mutex
	for {
		p.renew(ctx, func(peer string, err error) {
			mu.Lock()
			defer mu.Unlock()
			if was := failing[peer]; err != nil && !was {
				ctrl.LoggerFrom(ctx).Info("Could not subscribe to a replica; cold until it answers", "replica", peer, "error", err.Error())
			} else if err == nil && was {
				ctrl.LoggerFrom(ctx).Info("Subscribed to a replica again", "replica", peer)
			}
			failing[peer] = err != nil
		})
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.o.RenewEvery):
		}
	}
}

// renew renews the subscription to every peer in the view, in parallel,
// and reports each outcome to done.
func (p *Peers) renew(ctx context.Context, done func(peer string, err error)) {
	view, _ := p.t.View()
	var wg sync.WaitGroup
	for _, peer := range view {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sent := p.t.Now()
			resp, err := p.subscribe(ctx, peer)
			if err == nil {
				p.t.Renewed(peer, sent, resp)
			}
			done(peer, err)
		}()
	}
	wg.Wait()
}

func (p *Peers) subscribe(ctx context.Context, peer string) (SubscribeResponse, error) {
	var resp SubscribeResponse
	body, _ := json.Marshal(subscribeRequest{Address: p.o.Self})
	err := p.call(ctx, peer, SubscribePath, body, func(r io.Reader) error {
		return json.NewDecoder(io.LimitReader(r, maxSubscribeResponse)).Decode(&resp)
	})
	if err == nil && len(resp.Recent) > DefaultMaxMarkers {
		err = fmt.Errorf("replay of %d announcements, over %d", len(resp.Recent), DefaultMaxMarkers)
	}
	return resp, err
}

// call POSTs body to peer's path and hands a 200 response to read.
func (p *Peers) call(ctx context.Context, peer, path string, body []byte, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	// ?timeout= as the API server sends it: the other's deadlines on the
	// body and the answer (transport.ReviewTimeout) follow this call's.
	// The URL is built from its parts: peer is only ever the host.
	u := url.URL{Scheme: "https", Host: peer, Path: path, RawQuery: url.Values{"timeout": {callTimeout.String()}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ProtocolHeader, ProtocolVersion)
	res, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("%s%s answered %s: %s", peer, path, res.Status, bytes.TrimSpace(msg))
	}
	if read == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
		return nil
	}
	return read(res.Body)
}

// list lists all Locks from the API server (a consistent read, paginated)
// and marks those the cache lacks; the list counts if it started after
// the chain last broke.
func (p *Peers) list(ctx context.Context) {
	p.listActive.Lock()
	defer p.listActive.Unlock()
	started := p.t.Now()
	cont := ""
	for {
		var page lockv1alpha1.LockList
		pctx, cancel := context.WithTimeout(ctx, apiTimeout)
		err := p.api.List(pctx, &page, client.Limit(listPageSize), client.Continue(cont))
		cancel()
		if err != nil {
			ctrl.LoggerFrom(ctx).Info("Could not list the Locks to become warm; retrying", "error", err.Error())
			return
		}
		for i := range page.Items {
			if a, ok := AnnouncementOf(&page.Items[i]); ok {
				p.t.Mark(a)
			}
		}
		if cont = page.Continue; cont == "" {
			break
		}
	}
	p.t.Listed(started)
}

// sweep reads each marker older than TTL from the API server (a quorum
// GET: no resourceVersion) and clears it when its Lock is absent or has
// another UID, or the cache holds it; a marker that no Lock could match
// (validate) is cleared unread. A GET that fails otherwise keeps the
// marker: the Lock may exist and the cache lack it (fail closed).
func (p *Peers) sweep(ctx context.Context) {
	expired := p.t.Expired()
	// Bounded per pass: the rest stay marked (their deletes confirmed)
	// until a later pass.
	for _, a := range expired[:min(len(expired), maxSweep)] {
		if a.validate() != nil {
			// No Lock can have its name, namespace or target (a marker
			// of a replica before issue 36, or of a peer that marked
			// without this check): nothing to read, and its GET would
			// fail without NotFound for good.
			p.t.Clear(a)
			continue
		}
		var l lockv1alpha1.Lock
		gctx, cancel := context.WithTimeout(ctx, apiTimeout)
		err := p.api.Get(gctx, types.NamespacedName{Namespace: a.Namespace, Name: a.Name}, &l)
		cancel()
		switch {
		case apierrors.IsNotFound(err), err == nil && l.UID != a.UID:
			p.t.Clear(a)
		case err == nil && p.t.cache.HasUID(a.Namespace, a.Name, a.UID):
			p.t.Clear(a)
		case err != nil:
			ctrl.LoggerFrom(ctx).V(1).Info("Could not read a pending Lock; keeping its marker", "namespace", a.Namespace, "name", a.Name, "error", err.Error())
		}
	}
}

// AnnounceLock is Announce of the create of l, when l protects something
// (webhook.Announcer: the webhook calls it before it allows the create).
func (p *Peers) AnnounceLock(ctx context.Context, l *lockv1alpha1.Lock) error {
	a, ok := AnnouncementOf(l)
	if !ok {
		return nil // No delete can depend on it.
	}
	return p.Announce(ctx, a)
}

// Announce admits a Lock create: it marks it, and tells every subscriber,
// in parallel. It returns an error, which refuses the create, when a peer
// in the view is not subscribed or a subscriber could not be told.
func (p *Peers) Announce(ctx context.Context, a Announcement) error {
	if err := a.validate(); err != nil {
		// The webhook refuses such a create before it announces it
		// (Lock.ValidateAdmitted): checked again where it is kept.
		return err
	}
	subs, err := p.t.Admit(a)
	if err != nil {
		p.refused.Inc()
		return err
	}
	body, _ := json.Marshal(a)
	errs := make([]error, len(subs))
	var wg sync.WaitGroup
	for i, s := range subs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.call(ctx, s, PendingPath, body, nil); err != nil {
				errs[i] = fmt.Errorf("lockguard could not tell replica %s about this Lock; retry: %w", s, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		// The marker and the replay keep the create until the sweep
		// clears it (TTL): a refusal proves nothing about who else holds
		// a create of that UID, since a review can be forged.
		p.refused.Inc()
		return err
	}
	return nil
}
