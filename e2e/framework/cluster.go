package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// ClusterMode reports whether the suites run against the cluster of
// $KUBECONFIG, where lockguard is deployed (LOCKGUARD_E2E_MODE=cluster,
// make e2e-kind), rather than a control plane they start.
func ClusterMode() bool { return os.Getenv("LOCKGUARD_E2E_MODE") == "cluster" }

// ClusterConfig loads the client configuration of $KUBECONFIG (or
// kubectl's default), for cluster mode.
func ClusterConfig() (*rest.Config, error) {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading the kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	return cfg, nil
}

// InstallSampleCRDs creates or updates the sample CRDs of the repository
// at root (e2e/testdata/crds) on the API server of cfg and waits until
// they are served: what Start does for a local control plane, for a
// cluster.
func InstallSampleCRDs(cfg *rest.Config, root string) error {
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths:              []string{filepath.Join(root, "e2e", "testdata", "crds")},
		ErrorIfPathMissing: true,
		MaxTime:            time.Minute,
		PollInterval:       200 * time.Millisecond,
	})
	return err
}
