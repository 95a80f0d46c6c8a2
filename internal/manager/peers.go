package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/transport"
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

// setupPeers starts the protocol on mgr when o enables it, and serves
// the admission of Lock creates either way (allowing all when it is off).
// It returns the webhook's Freshness, nil when off.
func setupPeers(mgr ctrl.Manager, cfg *rest.Config, locks *readmodel.LockIndex, cert *certwatcher.CertWatcher, gate *transport.Gate, o Options) (*peers.Peers, error) {
	srv := mgr.GetWebhookServer()
	po := o.Peers
	if !po.enabled() || o.CacheOnlyDecisions {
		srv.Register(peers.AdmitPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			transport.ServeReview(gate, w, r, transport.DecodeReview, func(context.Context, admission.Request) admission.Response {
				return admission.Allowed("")
			})
		}))
		return nil, nil
	}
	if po.Self == "" && !po.Standalone {
		return nil, errors.New("the peer protocol needs this replica's address (--peer-address, or POD_IP)")
	}
	var src peers.Source
	var leases *peers.Leases
	switch {
	case po.Service != "":
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		if po.ServiceNamespace == "" {
			return nil, errors.New("the identity Leases of the replicas need a namespace (--leader-election-namespace)")
		}
		leases = &peers.Leases{Client: cs.CoordinationV1(), Namespace: po.ServiceNamespace, Group: po.Service, Self: po.Self, Duration: po.IdentityLease}
		src = leases
	case po.File != "":
		src = peers.File{Path: po.File, Self: po.Self}
	default:
		src = peers.Static(po.Static)
	}
	standalone := po.Standalone && po.File == "" && po.Service == ""
	popts := peers.Options{Self: po.Self, Source: src, RenewEvery: po.RenewEvery, Gate: gate}
	if ca, err := peerCA(po, o.CertDir); err == nil {
		popts.TLS, err = certs.PeerClientTLS(ca, po.ServerName, func() (*tls.Certificate, error) { return cert.GetCertificate(nil) })
		if err != nil {
			return nil, err
		}
		popts.Authenticate = func(r *http.Request) error { return certs.VerifyPeer(ca, po.ServerName, r) }
	} else if !standalone {
		return nil, err
	}
	// A standalone replica without a CA calls no one and accepts no call.
	t := peers.NewTracker(peers.Config{TTL: po.TTL, Lease: po.Lease, Trust: po.Trust, Standalone: standalone, Identity: leases != nil}, locks)
	if leases != nil {
		leases.Fresh = t.SelfFresh
	}
	if err := locks.OnDelivered(t.Observe); err != nil {
		return nil, fmt.Errorf("watching the Lock informer for pending Locks: %w", err)
	}
	if err := watchCreateEntry(mgr, cfg, t, o); err != nil {
		return nil, err
	}
	if !o.Controller.DisableNamespaceGuard {
		// The namespace guard's label goes on before a Lock create is
		// allowed; the reconciler keeps it while the create is pending.
		writer := mgr.GetClient()
		popts.LabelNamespace = func(ctx context.Context, ns string) error { return controller.LabelNamespace(ctx, writer, ns) }
	}
	p := peers.New(t, mgr.GetAPIReader(), popts)
	srv.Register(peers.SubscribePath, http.HandlerFunc(p.ServeSubscribe))
	srv.Register(peers.PendingPath, http.HandlerFunc(p.ServePending))
	srv.Register(peers.AdmitPath, http.HandlerFunc(p.ServeAdmission))
	if err := mgr.Add(p); err != nil {
		return nil, err
	}
	return p, nil
}

// peerCA is the CA that authenticates the other replicas: po.CAFile, or
// ca.crt in certDir. The protocol never runs unauthenticated: without
// one, lockguard does not start.
func peerCA(po PeerOptions, certDir string) (*certs.CAPool, error) {
	file := po.CAFile
	if file == "" {
		file = filepath.Join(certDir, certs.CAName)
	}
	ca, err := certs.NewCAPool(file)
	if err != nil {
		return nil, fmt.Errorf("the peer protocol authenticates the other replicas with the CA of their certificates "+
			"(--peer-ca-file, default ca.crt in --cert-dir, which cert-manager writes): %w", err)
	}
	return ca, nil
}

// SelfAddress returns ip:port, for --peer-address's default.
func SelfAddress(ip string, port int) string {
	if ip == "" {
		return ""
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
