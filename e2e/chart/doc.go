// Package chart tests lockguard's Helm chart (deploy/chart/lockguard), the
// one source of what ships: it renders every mode and option with the
// pinned helm (framework.Render), checks deploy/lockguard.yaml against the
// chart, installs the chart with server-side apply on the real API server
// of every cached Kubernetes version, runs helm install, upgrade and
// uninstall against one, and upgrades from the previous chart version (taken
// from git history) with the lockguard binary running and Locks in place,
// checking that no delete of a locked object is allowed meanwhile.
//
// The tests that start a control plane (TestInstall and
// TestUpgradeFromPreviousChart one per cached version, TestHelmLifecycle,
// TestCheckWebhook) are behind the e2e build tag, so that `go test ./...`
// starts two control planes only; `make unit` runs them after it:
//
//	go test -tags e2e -count=1 ./e2e/chart/
//
// The test that runs cert-manager's controllers with the chart lives in the
// separate module hack/certmanager, so that cert-manager's dependencies stay
// out of lockguard's go.mod.
package chart
