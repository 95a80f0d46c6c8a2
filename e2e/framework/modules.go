package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
)

// Versions of the projects whose CRDs the chart's objects need. Their CRDs
// are plain YAML in their Go modules, downloaded from the Go module proxy.
const (
	// CertManagerModule holds cert-manager's CRDs in deploy/crds. It is the
	// version hack/certmanager runs (its test checks that they agree):
	// v1.21.1, whose requirements are at or below lockguard's, so that the
	// test module shares lockguard's compiled packages (make kind images
	// use hack/kind/versions.sh's).
	CertManagerModule = "github.com/cert-manager/cert-manager@v1.21.1"
	// PrometheusOperatorModule holds the ServiceMonitor CRD in
	// example/prometheus-operator-crd.
	PrometheusOperatorModule = "github.com/prometheus-operator/prometheus-operator@v0.85.0"
)

// ModuleDir downloads module@version into the module cache (go mod download)
// and returns its directory.
func ModuleDir(ctx context.Context, moduleAtVersion string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", moduleAtVersion).Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("go mod download %s: %v %s", moduleAtVersion, err, info.Error)
	}
	return info.Dir, nil
}

// CertManagerCRDs returns the directory of cert-manager's CRDs.
func CertManagerCRDs(ctx context.Context) (string, error) {
	dir, err := ModuleDir(ctx, CertManagerModule)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "deploy", "crds"), nil
}

// ServiceMonitorCRD returns the file of prometheus-operator's ServiceMonitor
// CRD.
func ServiceMonitorCRD(ctx context.Context) (string, error) {
	return prometheusOperatorCRD(ctx, "servicemonitors")
}

// PrometheusRuleCRD returns the file of prometheus-operator's PrometheusRule
// CRD.
func PrometheusRuleCRD(ctx context.Context) (string, error) {
	return prometheusOperatorCRD(ctx, "prometheusrules")
}

func prometheusOperatorCRD(ctx context.Context, plural string) (string, error) {
	dir, err := ModuleDir(ctx, PrometheusOperatorModule)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_"+plural+".yaml"), nil
}
