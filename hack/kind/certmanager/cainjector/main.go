// Command cainjector is cert-manager's cainjector: it fills the caBundle of
// webhook configurations, APIServices and CRDs from Certificates and Secrets,
// set up as cert-manager's cainjector binary sets it up, with its leader
// election and the flags the cert-manager Helm chart passes.
package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/cert-manager/cert-manager/cmd/lockguard-kind/internal/cli"
	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/util"
)

func main() {
	var (
		kubeconfig, namespace, leNamespace, metricsAddr string
		leaderElect                                     bool
		leaseDuration, renewDeadline, retryPeriod       time.Duration
	)
	fs := pflag.NewFlagSet("cainjector", pflag.ExitOnError)
	fs.StringVar(&kubeconfig, "kubeconfig", "", "kubeconfig file; in-cluster configuration when empty")
	fs.StringVar(&namespace, "namespace", "", "watch only this namespace; all when empty")
	fs.BoolVar(&leaderElect, "leader-elect", true, "inject only while holding the leader Lease")
	fs.StringVar(&leNamespace, "leader-election-namespace", "kube-system", "namespace of the leader Lease")
	fs.DurationVar(&leaseDuration, "leader-election-lease-duration", 60*time.Second, "leader Lease duration")
	fs.DurationVar(&renewDeadline, "leader-election-renew-deadline", 40*time.Second, "leader Lease renew deadline")
	fs.DurationVar(&retryPeriod, "leader-election-retry-period", 15*time.Second, "leader Lease retry period")
	fs.StringVar(&metricsAddr, "metrics-listen-address", "0", "metrics address; 0 disables")
	cli.Main("cert-manager-cainjector", fs, func(ctx context.Context) error {
		ctrl.SetLogger(klog.Background())
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		// Its field manager is derived from the user agent.
		cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
		scheme := runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(scheme))
		utilruntime.Must(cmscheme.AddToScheme(scheme))
		utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
		utilruntime.Must(apiregistrationv1.AddToScheme(scheme))
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                  scheme,
			Cache:                   cache.Options{ReaderFailOnMissingInformer: true},
			Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
			Metrics:                 metricsserver.Options{BindAddress: metricsAddr},
			HealthProbeBindAddress:  "0",
			LeaderElection:          leaderElect,
			LeaderElectionNamespace: leNamespace,
			LeaderElectionID:        "cert-manager-cainjector-leader-election",
			LeaseDuration:           &leaseDuration,
			RenewDeadline:           &renewDeadline,
			RetryPeriod:             &retryPeriod,
		})
		if err != nil {
			return fmt.Errorf("creating the manager: %w", err)
		}
		err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
			Namespace:                    namespace,
			EnableCertificatesDataSource: true,
			EnabledReconcilersFor: map[string]bool{
				cainjector.MutatingWebhookConfigurationName:   true,
				cainjector.ValidatingWebhookConfigurationName: true,
				cainjector.APIServiceName:                     true,
				cainjector.CustomResourceDefinitionName:       true,
			},
		})
		if err != nil {
			return fmt.Errorf("setting up the injectors: %w", err)
		}
		return mgr.Start(ctx)
	})
}
