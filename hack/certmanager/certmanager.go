// Package certmanager runs cert-manager in-process for lockguard's tests:
// the controllers that issue Certificates from SelfSigned and CA issuers,
// and the cainjector that fills the caBundle of webhook configurations. They
// are built from the github.com/cert-manager/cert-manager Go module (the
// modules of cert-manager's binaries are not served by the Go module proxy,
// so Run wires the controllers the way those binaries do).
//
// It is a module of its own so that cert-manager's dependencies stay out of
// lockguard's go.mod; its test installs lockguard's Helm chart with these
// controllers and lockguard running in the same process.
package certmanager

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	"github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	crca "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	crselfsigned "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	"github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	"github.com/cert-manager/cert-manager/pkg/controller/issuers"
	"github.com/cert-manager/cert-manager/pkg/util"
	// The issuer types the issuers controller sets up.
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// Controllers are the cert-manager controllers Run starts: Issuers, the
// CertificateRequest approver and signers for SelfSigned and CA issuers, and
// the Certificate controllers (trigger, key manager, request manager,
// issuing, readiness, revision manager).
var Controllers = []string{
	issuers.ControllerName,
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

// Run runs the Controllers and the cainjector (for
// ValidatingWebhookConfigurations, from Certificates and Secrets) against the
// API server of the kubeconfig file, until ctx is cancelled.
func Run(ctx context.Context, kubeconfig string) error {
	factory, err := controller.NewContextFactory(ctx, controller.ContextOptions{
		Kubeconfig:         kubeconfig,
		KubernetesAPIQPS:   100,
		KubernetesAPIBurst: 200,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace: "cert-manager",
		},
		CertificateOptions: controller.CertificateOptions{
			// cert-manager's defaults.
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return fmt.Errorf("building cert-manager's controller context: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, name := range Controllers {
		newController, ok := controller.Known()[name]
		if !ok {
			return fmt.Errorf("cert-manager controller %s is not registered", name)
		}
		c, err := newController(factory)
		if err != nil {
			return fmt.Errorf("creating cert-manager controller %s: %w", name, err)
		}
		g.Go(func() error {
			if err := c.Run(2, gctx); err != nil {
				return fmt.Errorf("cert-manager controller %s: %w", name, err)
			}
			return nil
		})
	}
	// The controllers registered their informers; start them, as
	// cert-manager's controller binary does.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.SharedInformerFactory.Start(gctx.Done())
	shared.KubeSharedInformerFactory.Start(gctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(gctx.Done())

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	// Its field manager is derived from the user agent.
	cfg = util.RestConfigWithUserAgent(cfg, "cainjector")
	injector, err := newCAInjector(gctx, cfg)
	if err != nil {
		return err
	}
	g.Go(func() error { return injector.Start(gctx) })
	return g.Wait()
}

// newCAInjector returns a manager running cainjector's reconciler for
// ValidatingWebhookConfigurations, set up as cainjector's binary does.
func newCAInjector(ctx context.Context, cfg *rest.Config) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true},
		Client: client.Options{Cache: &client.CacheOptions{
			// cainjector reads Secrets directly, caching only their metadata.
			DisableFor: []client.Object{&corev1.Secret{}},
		}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// The test process may run other managers with other controllers.
		Controller: config.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return nil, fmt.Errorf("creating cainjector's manager: %w", err)
	}
	err = cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.ValidatingWebhookConfigurationName: true,
		},
	})
	if err != nil {
		return nil, fmt.Errorf("setting up cainjector: %w", err)
	}
	return mgr, nil
}
