// Package measure holds the scenarios of hack/bench, the benchmark
// program beside it, and what they run on: a control plane set up for
// lockguard (Cluster), the lockguard binary as a child process
// (Lockguard), load generators and latency statistics. The scenarios
// measure lockguard against the targets of issue 6: the webhook server
// over TLS, admission latency through a real API server, memory and
// start-up, convergence, and the protection window; and issue 13's
// admission modes side by side (modes.go), the namespace guard and the
// cascade guard. Every target is a ratio to a baseline measured in the
// same run (the machine is shared and noisy), or a latency bound.
// hack/bench runs them and writes docs/benchmarks.md; `make bench` runs
// hack/bench.
//
// Nothing here runs under `go test ./...`: the package has no tests.
package measure
