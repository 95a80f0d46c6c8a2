// Package e2e holds lockguard's end-to-end tests of the built binary: what
// needs the binary, several replicas, restarts, or the garbage collector
// and namespace controller of a real control plane (see README.md). The
// rest of the contract is in e2e/contract, in-process; the harness both use
// is e2e/framework.
//
// The tests are behind the e2e build tag, so `go test ./...` stays fast:
//
//	make build kube helm
//	go test -tags e2e -count=1 ./e2e/
//
// With LOCKGUARD_E2E_MODE unset or "local", the suite starts etcd,
// kube-apiserver and kube-controller-manager itself (e2e/framework), installs
// the chart as rendered for a local run, and runs bin/lockguard as separate
// processes with the chart's RBAC. With LOCKGUARD_E2E_MODE=cluster it runs
// against the cluster in KUBECONFIG, where lockguard is already deployed.
package e2e
