// Package e2e holds lockguard's end-to-end tests: black-box tests of the
// built lockguard binary against a real control plane, one test per
// scenario of the Lock contract (see README.md).
//
// The tests are behind the e2e build tag, so `go test ./...` stays fast:
//
//	make build kube
//	go test -tags e2e -count=1 ./e2e/
//
// With LOCKGUARD_E2E_MODE unset or "local", the suite starts etcd,
// kube-apiserver and kube-controller-manager itself (e2e/framework) and
// runs bin/lockguard as a separate process with the RBAC of deploy/rbac.
// With LOCKGUARD_E2E_MODE=cluster it runs against the cluster in KUBECONFIG,
// where lockguard is already deployed.
package e2e
