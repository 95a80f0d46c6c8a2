// Command controller is cert-manager's controller with the controllers that
// issue Certificates from SelfSigned and CA issuers (the ones lockguard's
// chart uses), wired as cert-manager's controller binary wires them, with
// its leader election and the flags the cert-manager Helm chart passes.
package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/cmd/lockguard-kind/internal/cli"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	// The issuer types the issuers controllers set up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// controllers are the controllers run: Issuers and ClusterIssuers, the
// CertificateRequest approver and signers for SelfSigned and CA issuers, and
// the Certificate controllers.
var controllers = []string{
	issuers.ControllerName,
	clusterissuers.ControllerName,
	approver.ControllerName,
	crselfsigned.CRControllerName,
	crca.CRControllerName,
	trigger.ControllerName,
	keymanager.ControllerName,
	requestmanager.ControllerName,
	issuing.ControllerName,
	readiness.ControllerName,
	revisionmanager.ControllerName,
}

type options struct {
	kubeconfig, clusterResourceNamespace, leaderElectionNamespace, healthzAddress string
	leaderElect                                                                   bool
	leaseDuration, renewDeadline, retryPeriod                                     time.Duration
	// Accepted because the chart passes them; ACME is not built in.
	acmeSolverImage         string
	maxConcurrentChallenges int
}

func main() {
	var o options
	fs := pflag.NewFlagSet("controller", pflag.ExitOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&o.clusterResourceNamespace, "cluster-resource-namespace", "kube-system", "namespace of the Secrets of ClusterIssuers")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "run the controllers only while holding the leader Lease")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "kube-system", "namespace of the leader Lease")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 60*time.Second, "leader Lease duration")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 40*time.Second, "leader Lease renew deadline")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", 15*time.Second, "leader Lease retry period")
	fs.StringVar(&o.healthzAddress, "healthz-listen-address", ":9403", "address of /livez (the chart's liveness probe): fails once the leader Lease is lost")
	fs.StringVar(&o.acmeSolverImage, "acme-http01-solver-image", "", "unused: this build has no ACME issuer")
	fs.IntVar(&o.maxConcurrentChallenges, "max-concurrent-challenges", 60, "unused: this build has no ACME issuer")
	cli.Main("cert-manager-controller", fs, func(ctx context.Context) error { return run(ctx, o) })
}

func run(ctx context.Context, o options) error {
	if !o.leaderElect {
		return runControllers(ctx, o)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	id, err := os.Hostname()
	if err != nil {
		return err
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.leaderElectionNamespace, "cert-manager-controller",
		cs.CoreV1(), cs.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	// /livez fails when this replica holds the Lease but stopped renewing
	// it, as the controller binary's does.
	watchdog := leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	srv := &http.Server{Addr: o.healthzAddress, ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := watchdog.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.Background().Error(err, "Serving /livez")
		}
	}()
	defer srv.Close()
	errc := make(chan error, 1)
	leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
		WatchDog:        watchdog,
		Lock:            lock,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { errc <- runControllers(ctx, o) },
			OnStoppedLeading: func() { klog.Background().Info("Stopped leading") },
		},
	})
	select {
	case err := <-errc:
		return err
	default:
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("lost the leader Lease")
	}
}

func runControllers(ctx context.Context, o options) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         o.kubeconfig,
		KubernetesAPIQPS:   20,
		KubernetesAPIBurst: 50,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: o.clusterResourceNamespace,
		},
		CertificateOptions: controller.CertificateOptions{
			// cert-manager's defaults.
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("building the controller context: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range controllers {
		newController, ok := controller.Known()[name]
		if !ok {
			return fmt.Errorf("controller %s is not registered", name)
		}
		c, err := newController(factory)
		if err != nil {
			return fmt.Errorf("creating controller %s: %w", name, err)
		}
		g.Go(func() error {
			if err := c.Run(5, gctx); err != nil {
				return fmt.Errorf("controller %s: %w", name, err)
			}
			return nil
		})
	}
	// The controllers registered their informers; start them.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.SharedInformerFactory.Start(gctx.Done())
	shared.KubeSharedInformerFactory.Start(gctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())
	klog.Background().Info("Started controllers", "controllers", controllers)
	return g.Wait()
}
