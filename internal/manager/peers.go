package manager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/internal/peers"
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
	// Service names lockguard's webhook Service, in ServiceNamespace,
	// whose EndpointSlices list the replicas (at the webhook port).
	Service, ServiceNamespace string
	// Self is this replica's address (host:port) as the others reach it;
	// SelfIP is its IP in the EndpointSlices.
	Self, SelfIP string
	// CAFile verifies the others' serving certificates, for ServerName;
	// default <CertDir>/ca.crt when it exists. Without one, certificates
	// are not verified.
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
func setupPeers(mgr ctrl.Manager, cfg *rest.Config, locks *controller.LockIndex, o Options) (*peers.Peers, error) {
	srv := mgr.GetWebhookServer()
	po := o.Peers
	if !po.enabled() || o.CacheOnlyDecisions {
		srv.Register(peers.AdmitPath, &admission.Webhook{Handler: admission.HandlerFunc(func(context.Context, admission.Request) admission.Response {
			return admission.Allowed("")
		})})
		return nil, nil
	}
	var src peers.Source
	switch {
	case po.Service != "":
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		if po.SelfIP == "" {
			return nil, errors.New("the peers of an EndpointSlice view need this replica's IP (POD_IP)")
		}
		if po.ServiceNamespace == "" {
			return nil, errors.New("the peers of an EndpointSlice view need the Service's namespace (--leader-election-namespace)")
		}
		src = peers.EndpointSlices{Client: cs, Namespace: po.ServiceNamespace, Service: po.Service, SelfIP: po.SelfIP, Port: o.WebhookPort}
	case po.File != "":
		src = peers.File{Path: po.File, Self: po.Self}
	default:
		src = peers.Static(po.Static)
	}
	if po.Self == "" && !po.Standalone {
		return nil, errors.New("the peer protocol needs this replica's address (--peer-address, or POD_IP)")
	}
	clientTLS, err := peerTLS(po, o.CertDir)
	if err != nil {
		return nil, err
	}
	t := peers.NewTracker(peers.Config{TTL: po.TTL, Lease: po.Lease, Trust: po.Trust,
		Standalone: po.Standalone && po.File == "" && po.Service == ""}, locks)
	if err := locks.OnDelivered(t.Observe); err != nil {
		return nil, fmt.Errorf("watching the Lock informer for pending Locks: %w", err)
	}
	popts := peers.Options{Self: po.Self, Source: src, TLS: clientTLS, RenewEvery: po.RenewEvery}
	if !o.Controller.DisableNamespaceGuard {
		// The namespace guard's label goes on before a Lock create is
		// allowed; the reconciler keeps it while the create is pending.
		writer := mgr.GetClient()
		popts.LabelNamespace = func(ctx context.Context, ns string) error { return controller.LabelNamespace(ctx, writer, ns) }
	}
	p := peers.New(t, mgr.GetAPIReader(), popts)
	srv.Register(peers.SubscribePath, http.HandlerFunc(p.ServeSubscribe))
	srv.Register(peers.PendingPath, http.HandlerFunc(p.ServePending))
	srv.Register(peers.AdmitPath, &admission.Webhook{Handler: p.AdmissionHandler()})
	if err := mgr.Add(p); err != nil {
		return nil, err
	}
	return p, nil
}

// peerTLS is the client TLS of calls to peers: the CA of the serving
// certificate where one is available.
func peerTLS(po PeerOptions, certDir string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: po.ServerName}
	caFile := po.CAFile
	if caFile == "" {
		caFile = filepath.Join(certDir, certs.CAName)
		if _, err := os.Stat(caFile); err != nil {
			ctrl.Log.WithName("peers").Info("No CA to verify the other replicas' certificates: calls to them are not verified", "looked", caFile)
			c.InsecureSkipVerify = true
			return c, nil
		}
	}
	pool, err := caPool(caFile)
	if err != nil {
		return nil, err
	}
	if po.ServerName == "" {
		// Verified for the host of each address (an IP in local runs).
		c.RootCAs = pool
		return c, nil
	}
	// The CA is read at every new connection, so that a renewed CA
	// (cert-manager rotates the Secret in place) is trusted without a
	// restart; the standard verification, for ServerName, is done by hand
	// against it.
	c.InsecureSkipVerify = true
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		pool, err := caPool(caFile)
		if err != nil {
			return err
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the replica sent no certificate")
		}
		inter := x509.NewCertPool()
		for _, ic := range cs.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: po.ServerName, Roots: pool, Intermediates: inter})
		return err
	}
	return c, nil
}

// caPool reads the PEM certificates of file.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("reading the peers' CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// SelfAddress returns ip:port, for --peer-address's default.
func SelfAddress(ip string, port int) string {
	if ip == "" {
		return ""
	}
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
