package peers

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/navique/lockguard/internal/transport"
)

// Config is what a replica's side of the protocol needs (New). Zero
// durations take the defaults.
type Config struct {
	// Self is this replica's address as the others reach it (host:port).
	Self string

	// The other replicas are the holders of Identity's Leases (in a
	// cluster); else those File lists (local runs); else Static. With none
	// of them, Standalone says that this replica is the only one, ever: it
	// needs no hold-off at start.
	Identity   *IdentityLeases
	File       string
	Static     []string
	Standalone bool

	// TLS is the client configuration of calls to the other replicas, and
	// Authenticate checks their calls (certs.PeerTLS). Nil Authenticate
	// refuses every call: only an authenticated replica may subscribe (and
	// so learn of pending creates) or announce.
	TLS          *tls.Config
	Authenticate func(*http.Request) error

	// Locks is this replica's Lock index (readmodel.LockIndex).
	Locks Locks
	// API reads Locks from the API server (the manager's APIReader).
	API Reader
	// Entry is the Lock-create entry this replica requires (EntryWatch).
	Entry EntryConfig

	// Gate bounds the peer endpoints together with every other path of
	// the webhook server; default: a Gate of their own.
	Gate *transport.Gate

	// TTL (DefaultTTL), Lease and Trust (DefaultLease, DefaultTrust) and
	// RenewEvery (DefaultRenewEvery) tune the protocol.
	TTL, Lease, Trust, RenewEvery time.Duration

	// Registerer receives the protocol's metrics; nil registers none.
	Registerer prometheus.Registerer
}

// IdentityLeases say where the replicas of one installation announce
// themselves (Leases).
type IdentityLeases struct {
	Client coordinationclient.LeasesGetter
	// Namespace holds the Leases, labelled LeaseGroupLabel=Group.
	Namespace, Group string
	// Duration: see DefaultLeaseDuration.
	Duration time.Duration
}

// EntryConfig names lockguard's ValidatingWebhookConfiguration, read
// through Client, whose Lock-create entry (CreateEntryName) must be as
// Want says (CheckCreateEntry).
type EntryConfig struct {
	Client        kubernetes.Interface
	Configuration string
	Want          Expectation
}

// Locks is what the protocol needs of the Lock informer.
type Locks interface {
	Cache
	// OnDelivered calls fn with the UID of every Lock the informer
	// delivers, after its store holds it.
	OnDelivered(fn func(types.UID)) error
}

// New returns a replica's side of the protocol, as cfg says: one
// controller-runtime Runnable (Peers.Start) and one http.Handler of the
// endpoints the other replicas call (Peers.ServeHTTP, at each of Paths).
// It watches cfg.Locks for the creates it was told about, and registers
// its metrics with cfg.Registerer.
func New(cfg Config) (*Peers, error) {
	switch {
	case cfg.Locks == nil || cfg.API == nil:
		return nil, errors.New("the peer protocol needs the Lock index and a reader of the API server")
	case cfg.Entry.Client == nil || cfg.Entry.Configuration == "":
		return nil, errors.New("the peer protocol needs lockguard's ValidatingWebhookConfiguration, whose Lock-create entry it watches")
	}
	var src Source
	var leases *Leases
	switch {
	case cfg.Identity != nil:
		id := cfg.Identity
		leases = &Leases{Client: id.Client, Namespace: id.Namespace, Group: id.Group, Self: cfg.Self, Duration: id.Duration}
		src = leases
	case cfg.File != "":
		src = File{Path: cfg.File, Self: cfg.Self}
	default:
		src = Static(cfg.Static)
	}
	standalone := cfg.Standalone && cfg.File == "" && cfg.Identity == nil
	t := newTracker(trackerConfig{TTL: cfg.TTL, Lease: cfg.Lease, Trust: cfg.Trust, Standalone: standalone, Identity: leases != nil}, cfg.Locks)
	if leases != nil {
		leases.Fresh = t.SelfFresh
	}
	if err := cfg.Locks.OnDelivered(t.Observe); err != nil {
		return nil, fmt.Errorf("watching the Lock informer for pending Locks: %w", err)
	}
	p := newPeers(t, cfg.API, cfg)
	p.src = src
	p.entry = newEntryWatch(entryListWatch(cfg.Entry.Client, cfg.Entry.Configuration), cfg.Entry.Configuration, cfg.Entry.Want, t)
	if cfg.Registerer != nil {
		if err := p.register(cfg.Registerer); err != nil {
			return nil, fmt.Errorf("registering the peer metrics: %w", err)
		}
		if err := cfg.Registerer.Register(p.entry.valid); err != nil {
			return nil, fmt.Errorf("registering the create entry's metric: %w", err)
		}
	}
	return p, nil
}
