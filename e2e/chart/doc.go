// Package chart renders lockguard's Helm chart (deploy/chart/lockguard)
// with the pinned helm binary and helps install it on the real control plane
// of e2e/framework: API-server capabilities the way helm reads them, the
// CRDs of cert-manager and prometheus-operator from their Go modules, and a
// Secret projected into a directory the way kubelet does it.
//
// The tests of this package check the rendered chart and install it with
// server-side apply on every cached Kubernetes version. The test that runs
// cert-manager's controllers lives in the separate module hack/certmanager,
// so that cert-manager's dependencies stay out of lockguard's go.mod.
package chart
