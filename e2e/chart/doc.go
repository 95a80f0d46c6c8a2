// Package chart tests lockguard's Helm chart (deploy/chart/lockguard), the
// one source of what ships: it renders every mode and option with the
// pinned helm (framework.Render), checks deploy/lockguard.yaml against the
// chart, installs the chart with server-side apply on the real API server
// of every cached Kubernetes version, and runs helm install, upgrade and
// uninstall against one.
//
// The test that runs cert-manager's controllers with the chart lives in the
// separate module hack/certmanager, so that cert-manager's dependencies stay
// out of lockguard's go.mod.
package chart
