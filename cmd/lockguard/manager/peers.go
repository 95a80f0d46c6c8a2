package manager

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"

	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

// The peer protocol's replica is the webhook's Freshness, and tells it of
// pending Lock creates of a target even where the index already denies,
// so that denials name every Lock.
var (
	_ webhook.Freshness      = (*peers.Peers)(nil)
	_ webhook.PendingCreates = (*peers.Peers)(nil)
)

// PeerOptions say how the replicas of lockguard tell each other of Lock
// creates (internal/peers), so that each decides the deletes its cache
// would allow from the cache alone when it can prove it complete. With
// none of Static, File and Service set, the protocol is off and every
// such delete is confirmed with the API server.
type PeerOptions struct {
	// Static lists the other replicas (host:port); Standalone says the
	// list is empty on purpose: this replica is the only one, ever.
	Static     []string
	Standalone bool
	// File lists the other replicas, one host:port a line, reread every
	// second (peers.File).
	File string
	// Service names lockguard's webhook Service: the replicas announce
	// themselves with identity Leases labelled with it in
	// ServiceNamespace (peers.Leases), each for IdentityLease (default
	// peers.DefaultLeaseDuration).
	Service, ServiceNamespace string
	IdentityLease             time.Duration
	// Self is this replica's address (host:port) as the others reach it.
	Self string
	// CAFile holds the CA of every replica's certificate, which each
	// presents as server and as client (mutual TLS), for ServerName (the
	// webhook Service's DNS name; empty: the IP of each address). Default
	// <CertDir>/ca.crt. Without one the protocol does not start: the
	// other replicas cannot be authenticated.
	CAFile, ServerName string
	// TTL, Lease, Trust and RenewEvery tune the protocol (peers.Config);
	// zero takes the defaults.
	TTL, Lease, Trust, RenewEvery time.Duration
}

// enabled reports whether the protocol runs.
func (o PeerOptions) enabled() bool {
	return o.Standalone || len(o.Static) > 0 || o.File != "" || o.Service != ""
}

// Only lockguard writes its replicas' identity Leases: the chart grants
// this verb to its ServiceAccount alone, and refuses anyone else's writes
// of them (peers.LeaseWriteVerb).
// +kubebuilder:rbac:groups=coordination.k8s.io,namespace=lockguard-system,resources=leases,verbs=lockguard-peer

// setupPeers starts the protocol on mgr when o enables it, its metrics
// registered with reg. It returns the webhook's Freshness and the
// announcer of Lock creates, nil when off.
func setupPeers(mgr ctrl.Manager, cfg *rest.Config, locks *readmodel.LockIndex, cert *certwatcher.CertWatcher, gate *transport.Gate, reg prometheus.Registerer, o Options) (*peers.Peers, error) {
	srv := mgr.GetWebhookServer()
	// The identity Leases' guard: served whatever the flags, since the
	// chart's entry may call it before the protocol is on; the API server
	// calls it, so its callers are checked as the review paths' are.
	review, err := o.ReviewCallers.wrapper()
	if err != nil {
		return nil, err
	}
	srv.Register(peers.LeaseGuardPath, review(peers.NewLeaseGuard(gate)))
	po := o.Peers
	if !po.enabled() || o.CacheOnlyDecisions {
		return nil, nil
	}
	pc, err := peerConfig(cfg, o)
	if err != nil {
		return nil, err
	}
	pc.Locks, pc.API, pc.Gate, pc.Registerer = locks, mgr.GetAPIReader(), gate, reg
	// A standalone replica without a CA calls no one and accepts no call.
	if ptls, err := certs.NewPeerTLS(po.CAFile, o.CertDir, po.ServerName, cert); err == nil {
		pc.TLS, pc.Authenticate = ptls.Client, ptls.Authenticate
	} else if !pc.Standalone || pc.File != "" || pc.Identity != nil {
		return nil, fmt.Errorf("the peer protocol authenticates the other replicas with the CA of their certificates "+
			"(--peer-ca-file, default ca.crt in --cert-dir, which cert-manager writes): %w", err)
	}
	p, err := peers.New(pc)
	if err != nil {
		return nil, err
	}
	// Started before the caches sync: it decides readiness (beforeCaches).
	if err := mgr.Add(beforeCaches{p}); err != nil {
		return nil, err
	}
	for _, path := range peers.Paths() {
		srv.Register(path, p)
	}
	return p, nil
}

// peerConfig checks o's peer flags and returns the protocol's Config as
// they say: which replicas, the Lock-create entry and the tuning.
func peerConfig(cfg *rest.Config, o Options) (peers.Config, error) {
	po, eo := o.Peers, o.CreateEntry
	if po.Self == "" && !po.Standalone {
		return peers.Config{}, errors.New("the peer protocol needs this replica's address (--peer-address, or POD_IP)")
	}
	if eo.Configuration == "" {
		return peers.Config{}, errors.New("the peer protocol needs the name of lockguard's ValidatingWebhookConfiguration (--webhook-configuration): " +
			"a replica decides from its cache only while the Lock-create entry there sends every Lock create to lockguard")
	}
	if eo.Want.URL == "" && (eo.Want.ServiceName == "" || eo.Want.ServiceNamespace == "") {
		return peers.Config{}, errors.New("checking the Lock-create webhook entry needs the webhook Service (--peer-service and --leader-election-namespace) or --webhook-url")
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return peers.Config{}, err
	}
	want := eo.Want
	want.Path = webhook.CreatePath
	pc := peers.Config{
		Self: po.Self, File: po.File, Static: po.Static, Standalone: po.Standalone,
		Entry: peers.EntryConfig{Client: cs, Configuration: eo.Configuration, Want: want},
		TTL:   po.TTL, Lease: po.Lease, Trust: po.Trust, RenewEvery: po.RenewEvery,
	}
	if po.Service != "" {
		if po.ServiceNamespace == "" {
			return peers.Config{}, errors.New("the identity Leases of the replicas need a namespace (--leader-election-namespace)")
		}
		pc.Identity = &peers.IdentityLeases{Client: cs.CoordinationV1(), Namespace: po.ServiceNamespace, Group: po.Service, Duration: po.IdentityLease}
	}
	return pc, nil
}

// SelfAddress returns ip:port, for --peer-address's default.
func SelfAddress(ip string, port int) string {
	if ip == "" {
		return ""
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
