// Command lockguard serves the Lock admission webhook (every replica) and
// runs the reconciler that keeps the core.navique.com/locked annotation and
// the Lock status (the leader). `lockguard check-webhook` checks that a
// webhook server answers (the chart's helm test).
package main

import (
	"flag"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/internal/denials"
	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/transport"
	"github.com/navique/lockguard/webhook"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == checkWebhookCommand {
		if err := checkWebhook(os.Args[2:], os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "lockguard "+checkWebhookCommand+":", err)
			os.Exit(1)
		}
		return
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "lockguard:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		o       manager.Options
		qps     float64
		burst   int
		showVer bool
		delay   time.Duration
		// webhookServicePort: see --webhook-service-port.
		webhookServicePort int
	)
	fs := flag.CommandLine
	fs.StringVar(&o.WebhookHost, "webhook-host", "", "Address the webhook server binds to (default: all addresses).")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "Port of the webhook server.")
	fs.StringVar(&o.CertDir, "cert-dir", "/tmp/k8s-webhook-server/serving-certs", "Directory with the webhook server's tls.crt and tls.key; reloaded when they change.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", false, "Serve HTTP/2 on the webhook server (off by default: HTTP/2 rapid reset and stream exhaustion).")
	fs.IntVar(&o.WebhookLimits.MaxInFlight, "webhook-max-in-flight", transport.DefaultMaxInFlight, "Requests served at once by the webhook server, on every path together (admission reviews, the other replicas' calls); more are answered HTTP 429 at once (with failurePolicy Fail, the API server then refuses the delete: fail closed).")
	fs.IntVar(&o.WebhookLimits.MaxInFlightPerSource, "webhook-max-in-flight-per-source", transport.DefaultMaxInFlightPerSource, "Requests served at once by the webhook server from one source address; more are answered HTTP 429 at once (at most --webhook-max-in-flight). When --webhook-max-in-flight are served, a request from an address holding fewer than another is served in place of that address's oldest request whose body is still arriving, which is answered HTTP 429; a body that does not fit --webhook-max-buffered-bytes likewise cuts off the arriving body of the address holding the most bytes. Behind a proxy or a load balancer that hides the API server's address, raise it to --webhook-max-in-flight.")
	fs.Int64Var(&o.WebhookLimits.MaxBufferedBytes, "webhook-max-buffered-bytes", transport.DefaultMaxBufferedBytes, "Bytes the bodies of the requests in flight on the webhook server may hold together (each grows with the bytes that arrive, not with the declared length); a review that does not fit is answered HTTP 429. Under GOMEMLIMIT the bound is what the caches leave, when less, never under 16 MiB.")
	fs.IntVar(&o.WebhookConnections.Max, "webhook-max-connections", transport.DefaultMaxConnections, "Connections the webhook server holds open at once. When that many are open, a new connection from an address holding fewer than the address holding the most, and less than an even share of those open, is served in place of one of the latter's; any other is closed. A request must arrive (TLS handshake and headers, at most 8 KiB) within 32 s, its body within the review's timeout (at most 30 s); an answer given before the body was read closes the connection. Under GOMEMLIMIT, beyond 64 connections, a new one is admitted only while the memory the caches leave holds it.")
	fs.IntVar(&o.WebhookConnections.PerSource, "webhook-max-connections-per-source", transport.DefaultMaxConnectionsPerSource, "Connections the webhook server holds open from one source address; more are closed at once (at most --webhook-max-connections). Behind a proxy or a load balancer that hides the API server's address, raise it to --webhook-max-connections.")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "Address of the metrics endpoint; \"0\" disables it.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "Serve metrics over HTTPS, allowing only callers authorized to get /metrics (TokenReview and SubjectAccessReview).")
	fs.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "Directory with tls.crt and tls.key for the metrics endpoint (default: a self-signed certificate).")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz; \"0\" disables them.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "0", "Address of the Go profiler's /debug/pprof/ endpoints, unauthenticated: use loopback, e.g. 127.0.0.1:6060; \"0\" disables them.")
	fs.BoolVar(&o.LeaderElection, "leader-elect", true, "Run the reconciler on one elected replica at a time (the webhook is served by every replica).")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader-election Lease (default: the pod's namespace; required out of cluster).")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", 15*time.Second, "How long a leader's Lease is valid without renewal.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", 10*time.Second, "How long the leader keeps trying to renew before giving up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", 2*time.Second, "How often candidates try to acquire or renew leadership.")
	fs.IntVar(&o.Controller.MaxConcurrentReconciles, "max-concurrent-reconciles", 4, "Workers of the reconciler.")
	fs.BoolVar(&o.CacheOnlyDecisions, "cache-only-decisions", false, "Decide deletes from the Lock cache alone, without confirming allowed deletes with the API server: faster (no consistent list per allowed delete, which can take up to ~100ms under write load), but a delete sent milliseconds after a Lock's create may get through.")
	peerList := fs.String("peers", "", "The other lockguard replicas (host:port,...), for the peer protocol: with it (even empty: this is the only replica) the deletes the Lock cache would allow are confirmed with the API server only when a Lock create of the target is pending or the replica cannot prove it heard of every create (internal/peers). Without --peers, --peers-file or --peer-service every such delete is confirmed.")
	fs.StringVar(&o.Peers.File, "peers-file", "", "File listing the other replicas, one host:port a line, reread every second (local runs; see --peers).")
	fs.StringVar(&o.Peers.Service, "peer-service", "", "Name of lockguard's webhook Service: each replica announces itself with an identity Lease labelled "+peers.LeaseGroupLabel+"=<name> in --leader-election-namespace, holding --peer-address, and the other replicas are the Leases renewed within --peer-identity-lease (see --peers).")
	fs.DurationVar(&o.Peers.IdentityLease, "peer-identity-lease", peers.DefaultLeaseDuration, "How long an identity Lease (--peer-service) counts after its last renewal; renewed every sixth of it. A replica that dies without deleting its Lease stops Lock creates for at most about this long.")
	fs.StringVar(&o.Peers.Self, "peer-address", "", "This replica's host:port as the others reach it (default: $POD_IP:--webhook-port).")
	fs.StringVar(&o.Peers.CAFile, "peer-ca-file", "", "CA of the replicas' certificates, which they present to each other as server and as client (mutual TLS; the serving certificate must allow client auth). Default: ca.crt in --cert-dir. Without one, lockguard refuses to start with the peer protocol (a standalone --peers= replica then accepts no peer call).")
	fs.StringVar(&o.ReviewCallers.CAFile, "review-client-ca", "", "CA of the client certificate the API server presents to lockguard's webhook (its AdmissionConfiguration's kubeConfigFile): the admission review paths then answer only callers with one, and a forged review learns nothing (docs/hostile-clients.md). Default: off, any caller that reaches the port is answered.")
	fs.StringVar(&o.ReviewCallers.Name, "review-client-name", "", "With --review-client-ca: a DNS name the caller's certificate must hold (a subject alternative name).")
	fs.StringVar(&o.Peers.ServerName, "peer-server-name", "", "Name the other replicas' certificates are verified for, as servers and as clients (the webhook Service's DNS name in the chart; default: the IP of their address).")
	fs.StringVar(&o.CreateEntry.Configuration, "webhook-configuration", "", "Name of lockguard's ValidatingWebhookConfiguration (the chart's), required with the peer protocol: a replica decides from its cache only while the Lock-create entry ("+peers.CreateEntryName+") there sends every Lock CREATE to lockguard as the chart renders it (CREATE of locks in apiVersions \"*\", failurePolicy Fail, no selectors or matchConditions, the webhook Service of --peer-service at --webhook-service-port, path "+webhook.CreatePath+"); otherwise, and for --pending-ttl after it is restored, every delete the cache would allow is confirmed with the API server.")
	fs.IntVar(&webhookServicePort, "webhook-service-port", 443, "Port of the webhook Service that the Lock-create entry must call (see --webhook-configuration).")
	fs.StringVar(&o.CreateEntry.Want.URL, "webhook-url", "", "Instead of the webhook Service: the https://host:port the Lock-create entry must call, at "+webhook.CreatePath+" (local runs; see --webhook-configuration).")
	fs.DurationVar(&o.Peers.TTL, "pending-ttl", 0, "How long a Lock create is remembered and a new replica stays cold; longer than a create request can take (default 2m).")
	namespaceGuard := fs.Bool("namespace-guard", true, "Keep the label "+lockv1alpha1.HasLocksLabel+"=true on each namespace holding live Locks (the namespace guard's webhook entry selects on it), putting it on a Lock's namespace before the Lock's create is allowed ("+webhook.CreatePath+"; with or without the peer protocol); a Lock is active only once its namespace carries it. false when the chart's guards.namespace.enabled is false.")
	cascadeGuard := fs.String("cascade-guard", string(webhook.CascadeDeny), "What the webhook does with the DELETE of an owner whose garbage-collector cascade would delete a locked object: Deny, Warn (allow with a warning) or Off (no owner index, no check). Except with Off, every replica caches the metadata of the group's objects. The chart's guards.cascade.")
	readOnlyGuard := fs.Bool("read-only-guard", true, "Serve the update guard of ReadOnly Locks at "+webhook.UpdatePath+": an UPDATE or PATCH of an object a live ReadOnly Lock covers is refused when it changes the object's spec or metadata (not its status, nor lockguard's own annotation and label), unless an exempt principal (lockguard itself, --read-only-exempt) sends it; so is one through any subresource but status (a scale); with the ClusterLock guard, also the update guard of ReadOnly ClusterLocks at "+webhook.ClusterUpdatePath+". false when the chart renders no update entry (guards.readOnly.enabled false, or mode policy): ReadOnly Locks then say GuardDisabled.")
	clusterLockGuard := fs.Bool("cluster-lock-guard", true, "Serve the ClusterLock guard ("+webhook.ClusterLockPath+", "+webhook.ClusterLabelPath+" and "+webhook.ClusterCreatePath+": the DELETE of a cluster-scoped object a live ClusterLock names or selects is refused, and so is removing its label "+lockv1alpha1.ClusterLockedLabel+"; a ClusterLock's create labels its target, or what its selector matches, first), and keep that label on the ClusterLocks' targets. false when the chart renders no ClusterLock entry (guards.clusterLock.enabled false, or mode policy): ClusterLocks then say GuardDisabled.")
	fs.BoolVar(&o.ExceptionsBesidePolicy, "exceptions-beside-policy", false, "The chart's ValidatingAdmissionPolicy runs beside the webhook (mode both): it refuses from the lock annotation and cannot read LockExceptions, so each LockException create is allowed with a warning saying so. The chart sets it in mode both.")
	var exempt []string
	fs.Func("read-only-exempt", "A principal whose updates ReadOnly Locks never refuse: a username (system:serviceaccount:NAMESPACE:NAME for a ServiceAccount) or group:NAME; repeat the flag or separate entries with commas. lockguard itself is always exempt (it learns its username with a SelfSubjectReview). A principal that holds everyone (group:system:authenticated, group:system:unauthenticated, group:system:serviceaccounts, system:anonymous) is refused. The chart's readOnly.exemptPrincipals.", func(v string) error {
		exempt = append(exempt, v)
		return nil
	})
	fs.Func("protect-resource", "A resource of another API group whose objects Locks can protect (docs/contract.md rule 21): <resource> for the core group (persistentvolumeclaims, secrets) or <resource>.<group> (statefulsets.apps), namespaced; repeat the flag or separate entries with commas. lockguard refuses to start when one is not served, is cluster-scoped or cannot be listed, watched and patched. Its deletes reach lockguard only through the chart's protect entries (protect.resources), which select the namespaces labelled "+lockv1alpha1.HasLocksLabel+"=true: needs --namespace-guard.", func(v string) error {
		for _, s := range strings.Split(v, ",") {
			gr, err := readmodel.ParseProtectResource(s)
			if err != nil {
				return err
			}
			o.ProtectResources = append(o.ProtectResources, gr)
		}
		return nil
	})
	fs.DurationVar(&o.Controller.DiscoveryInterval, "discovery-interval", 30*time.Second, "How often the core.navique.com group is rediscovered for kinds to watch.")
	fs.DurationVar(&o.DenialFlushInterval, "denial-flush-interval", denials.DefaultInterval, "How often, at most, this replica writes the status.lastDenied of one Lock: the first refusal of a quiet Lock is written at once, the ones that follow within the interval are added to the count of the next write, so that a delete loop makes one status write per Lock per interval.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long to wait for the servers and the reconciler to stop.")
	fs.DurationVar(&delay, "shutdown-delay", 0, "How long to keep serving after SIGTERM before stopping, so that the Pod leaves its Services' endpoints first.")
	fs.Float64Var(&qps, "kube-api-qps", manager.DefaultQPS, "Queries per second to the API server, per resource (each resource's client has its own limit). Locks cost about two writes each to converge.")
	fs.IntVar(&burst, "kube-api-burst", manager.DefaultBurst, "Burst of queries to the API server, per resource.")
	fs.BoolVar(&showVer, "version", false, "Print the version and exit.")
	config.RegisterFlags(fs)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	flag.Parse()
	o.Controller.DisableNamespaceGuard = !*namespaceGuard
	if len(o.ProtectResources) > 0 && !*namespaceGuard {
		return fmt.Errorf("--protect-resource needs --namespace-guard: its webhook entries select the namespaces labelled %s=true", lockv1alpha1.HasLocksLabel)
	}
	o.DisableReadOnlyGuard = !*readOnlyGuard
	o.DisableClusterLockGuard = !*clusterLockGuard
	mode, err := webhook.ParseCascadeMode(*cascadeGuard)
	if err != nil {
		return err
	}
	o.CascadeGuard = mode
	if o.ReadOnlyExempt, err = webhook.ParseExemptions(exempt); err != nil {
		return fmt.Errorf("--read-only-exempt: %w", err)
	}
	if peersSet(fs) {
		list, err := peers.ParseList(*peerList)
		if err != nil {
			return fmt.Errorf("--peers: %w", err)
		}
		o.Peers.Static, o.Peers.Standalone = list, len(list) == 0
	}
	if n := countSet(fs, "peers", "peers-file", "peer-service"); n > 1 {
		return fmt.Errorf("pass one of --peers, --peers-file and --peer-service")
	}
	if o.Peers.Self == "" {
		o.Peers.Self = manager.SelfAddress(os.Getenv("POD_IP"), o.WebhookPort)
	}
	o.Peers.ServiceNamespace = o.LeaderElectionNamespace
	if webhookServicePort < 1 || webhookServicePort > 65535 {
		return fmt.Errorf("--webhook-service-port %d is not a port", webhookServicePort)
	}
	if o.CreateEntry.Want.URL == "" {
		o.CreateEntry.Want.ServiceName, o.CreateEntry.Want.ServiceNamespace = o.Peers.Service, o.Peers.ServiceNamespace
		o.CreateEntry.Want.ServicePort = int32(webhookServicePort)
	}
	if showVer {
		fmt.Println("lockguard", version)
		return nil
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q; see -help", fs.Args())
	}
	if o.LeaderElection && o.LeaderElectionNamespace == "" && !inCluster() {
		return fmt.Errorf("--leader-election-namespace is required when running outside a cluster (or pass --leader-elect=false)")
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	// The chart sets GOMEMLIMIT (90% of the container's memory limit): the
	// one place lockguard's soft memory limit comes from (docs/limits.md).
	if limit := debug.SetMemoryLimit(-1); limit < math.MaxInt64 {
		log.Info("Go soft memory limit (GOMEMLIMIT)", "bytes", limit)
	}

	cfg, err := config.GetConfig()
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.QPS = float32(qps)
	cfg.Burst = burst
	cfg.UserAgent = "lockguard/" + version

	ctx := delayDone(ctrl.SetupSignalHandler(), delay)
	mgr, err := manager.New(ctx, cfg, o)
	if err != nil {
		return err
	}
	log.Info("Starting lockguard", "version", version, "webhookPort", o.WebhookPort, "leaderElection", o.LeaderElection)
	if err := mgr.Start(ctx); err != nil {
		return fmt.Errorf("running: %w", err)
	}
	log.Info("Stopped")
	return nil
}

// peersSet reports whether --peers was given.
func peersSet(fs *flag.FlagSet) bool { return countSet(fs, "peers") > 0 }

// countSet returns how many of names were given on the command line.
func countSet(fs *flag.FlagSet, names ...string) int {
	n := 0
	fs.Visit(func(f *flag.Flag) {
		for _, name := range names {
			if f.Name == name {
				n++
			}
		}
	})
	return n
}

// inCluster reports whether lockguard runs in a Pod with a ServiceAccount,
// where the leader-election namespace is the Pod's.
func inCluster() bool {
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return err == nil
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"
