// Package hostile holds black-box tests of the built lockguard binary
// against a real control plane under attack by clients that reach its
// webhook port without credentials: each scenario is one file
// (connections_test.go: clients that hold connections to jam the port;
// stalled_test.go and stalledlease_test.go: bodies stalled to hold
// memory, the latter on the identity Leases' path; inflight_test.go:
// review bodies trickled to hold the requests served at once;
// forgedcreates_test.go: forged Lock creates with long and odd names, and
// of valid Locks that do not exist), sharing the setup of main_test.go
// (one control plane, one replica installed as the chart renders it and
// called by the API server directly, its metrics and profiler on
// loopback, --pending-ttl 20 s). Add a scenario as a file of its own.
//
// The tests are behind the e2e build tag:
//
//	make build
//	LOCKGUARD_KUBE_VERSION=1.29.15 go test -tags e2e -count=1 ./e2e/hostile/
//
// Hostile clients dial from other loopback addresses (127.0.0.2 and up;
// all of 127.0.0.0/8 is loopback on Linux) than the API server, which
// calls from 127.0.0.1, as the API server and an attacking pod come from
// different addresses in a cluster.
package hostile
