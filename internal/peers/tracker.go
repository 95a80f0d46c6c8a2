package peers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Reasons a replica confirms an allowed delete, as MayLack returns them
// and lockguard_confirmations_total counts them.
const (
	ReasonMarker = "marker"
	ReasonCold   = "cold"
)

// Defaults of trackerConfig.
const (
	// DefaultTTL is longer than a create request can take (the API
	// server's request timeout is 60s): a Lock admitted that long ago has
	// been written to etcd or never will be.
	DefaultTTL = 2 * time.Minute
	// DefaultLease is how long a replica keeps a subscription it was
	// sent, and DefaultTrust how long the subscriber relies on it, counted
	// from when it sent the renewal: shorter, so that the subscriber stops
	// relying on it before the other stops telling.
	DefaultLease = 10 * time.Second
	DefaultTrust = 8 * time.Second
	// DefaultRenewEvery is how often a replica renews its subscriptions.
	DefaultRenewEvery = 2 * time.Second
	// DefaultMaxMarkers bounds the markers of a replica, and the
	// admissions it keeps for replay.
	DefaultMaxMarkers = 10000
	// DefaultMaxSubscribers bounds the subscriptions a replica keeps.
	DefaultMaxSubscribers = 64
)

// trackerConfig configures a Tracker. Zero durations and counts take the
// defaults above.
type trackerConfig struct {
	// TTL: see DefaultTTL.
	TTL time.Duration
	// Lease, Trust: see DefaultLease; Trust must be shorter than Lease.
	Lease, Trust time.Duration
	// MaxMarkers, MaxSubscribers: see their defaults.
	MaxMarkers, MaxSubscribers int
	// Standalone says that no other replica exists or ever did (a static,
	// empty peer list): no hold-off at start.
	Standalone bool
	// Identity says that the view comes from identity Leases (Leases):
	// the replica is warm, and admits creates, only while its own Lease
	// is fresh (SelfFresh).
	Identity bool
	// Now is the clock; default time.Now.
	Now func() time.Time
}

func (c trackerConfig) withDefaults() trackerConfig {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.TTL, DefaultTTL)
	def(&c.Lease, DefaultLease)
	def(&c.Trust, DefaultTrust)
	if c.MaxMarkers <= 0 {
		c.MaxMarkers = DefaultMaxMarkers
	}
	if c.MaxSubscribers <= 0 {
		c.MaxSubscribers = DefaultMaxSubscribers
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Cache is what the Tracker needs of the Lock informer.
type Cache interface {
	// HasSynced reports whether the informer has synced.
	HasSynced() bool
	// HasUID reports whether the informer's store holds the Lock
	// namespace/name with that UID.
	HasUID(namespace, name string, uid types.UID) bool
}

// Tracker is a replica's markers and its warm/cold state, and the
// subscriptions others hold to it. It is safe for concurrent use; it does
// no I/O (Peers does).
type Tracker struct {
	cfg   trackerConfig
	cache Cache

	mu      sync.Mutex
	markers *markerSet

	// The view: the other replicas, as the peer source lists them.
	view      []string
	viewKnown bool
	// trusted is, per peer, until when this replica relies on its
	// subscription to it.
	trusted map[string]time.Time
	// holdOff: cold until then, and the list must start then or later.
	holdOff time.Time
	// broke is the last moment the chain of subscriptions broke; listed
	// is the start of the last list of all Locks that completed; warm
	// needs listed after broke.
	broke, listed time.Time

	// subscribers are the replicas subscribed to this one, each with the
	// end of its lease.
	subscribers map[string]time.Time
	// recent are the creates this replica admitted, oldest first, kept
	// for TTL for replay; replayIncomplete: until then, a replay may miss
	// some (the bound dropped them).
	recent           []admitted
	replayIncomplete time.Time

	// fresh is the interval in which this replica's identity Lease is
	// fresh (trackerConfig.Identity), as SelfFresh last reported it.
	freshFrom, freshUntil time.Time
	// entry is the Lock-create entry's state (RequireCreateEntry).
	entry createEntry
}

// admitted is one create this replica admitted, and when.
type admitted struct {
	a  Announcement
	at time.Time
}

// newTracker returns a cold Tracker. Unless cfg.Standalone, it stays
// cold for cfg.TTL: a replica that died before this one started may have
// admitted a create that has not reached etcd yet.
func newTracker(cfg trackerConfig, cache Cache) *Tracker {
	cfg = cfg.withDefaults()
	now := cfg.Now()
	t := &Tracker{cfg: cfg, cache: cache, markers: newMarkerSet(cfg.MaxMarkers),
		trusted: map[string]time.Time{}, subscribers: map[string]time.Time{}, broke: now}
	if !cfg.Standalone {
		t.holdOff = now.Add(cfg.TTL)
	}
	return t
}

// MayLack reports whether the Lock cache may lack a live Lock of key, and
// why (ReasonCold, ReasonMarker). The webhook asks before it reads the
// cache: a marker is removed only once the cache holds its Lock.
func (t *Tracker) MayLack(key lockv1alpha1.TargetKey) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.warmLocked(t.cfg.Now()) {
		return ReasonCold, true
	}
	if t.markers.has(key) {
		return ReasonMarker, true
	}
	return "", false
}

// MayLackIn reports whether the cache may lack a live Lock of anything in
// namespace ns: MayLack of every key of ns at once (cold, or a pending
// marker of a Lock create in ns).
func (t *Tracker) MayLackIn(ns string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.warmLocked(t.cfg.Now()) || t.markers.hasIn(ns)
}

// PendingCreate reports whether this replica holds a pending marker of a
// Lock create of key, warm or not.
func (t *Tracker) PendingCreate(key lockv1alpha1.TargetKey) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.markers.has(key)
}

// PendingIn reports whether this replica holds a pending marker of a Lock
// create in namespace ns: a create admitted (by any replica that told this
// one) whose Lock the cache has not delivered yet. The reconciler keeps
// the namespace's HasLocksLabel while it does, since the admitting replica
// put the label on before allowing the create.
func (t *Tracker) PendingIn(ns string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.markers.hasIn(ns)
}

// Warm reports whether the replica decides allowed deletes from its
// cache (for metrics and tests).
func (t *Tracker) Warm() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.warmLocked(t.cfg.Now())
}

// Markers returns the number of markers.
func (t *Tracker) Markers() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.markers.len()
}

// warmLocked reports whether the replica is warm at now. A peer whose
// subscription it no longer trusts breaks the chain: a list is needed
// again, after it is trusted again.
func (t *Tracker) warmLocked(now time.Time) bool {
	if !t.selfFreshLocked(now) || !t.allTrustedLocked(now) {
		return false
	}
	return t.cache.HasSynced() && t.entryValidLocked() && !now.Before(t.holdOff) && t.listed.After(t.broke)
}

// allTrustedLocked reports whether the view is known and every peer in it
// trusted at now; when one is not, the chain breaks at now.
func (t *Tracker) allTrustedLocked(now time.Time) bool {
	if !t.viewKnown {
		return false
	}
	for _, p := range t.view {
		if !now.Before(t.trusted[p]) {
			t.breakLocked(now)
			return false
		}
	}
	return true
}

func (t *Tracker) breakLocked(now time.Time) {
	if now.After(t.broke) {
		t.broke = now
	}
}

// lostLocked records that a create may have been lost at now: cold for
// TTL, then a list.
func (t *Tracker) lostLocked(now time.Time) {
	t.breakLocked(now)
	if until := now.Add(t.cfg.TTL); until.After(t.holdOff) {
		t.holdOff = until
	}
}

// NeedsList reports whether the replica waits only for a list of all
// Locks to be warm; the list must start after the call.
func (t *Tracker) NeedsList() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	return t.selfFreshLocked(now) && t.allTrustedLocked(now) && t.cache.HasSynced() && t.entryValidLocked() && !now.Before(t.holdOff) && !t.listed.After(t.broke)
}

// Listed records a completed list of all Locks that started at started,
// after the Locks it found that the cache lacked were marked.
func (t *Tracker) Listed(started time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if started.After(t.listed) && !started.Before(t.holdOff) {
		t.listed = started
	}
}

// Now returns the Tracker's clock.
func (t *Tracker) Now() time.Time { return t.cfg.Now() }
