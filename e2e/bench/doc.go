// Package bench measures lockguard against the targets of issue 6: the
// webhook server over TLS, admission latency through a real API server,
// memory and start-up, convergence, and the protection window. Every
// target is a ratio to a baseline measured in the same run (the machine
// is shared and noisy), or a latency bound. hack/bench runs the scenarios
// and writes docs/benchmarks.md; `make bench` runs hack/bench.
//
// Issue 13's measurements (reads.go, decisions.go, candidates.go) compare
// the read that confirms an allowed delete with candidate confirmations,
// served by a webhook server of the bench's own (ServeCandidates); they
// run only with `hack/bench -only reads,decisions` (make bench-decisions).
//
// Nothing here runs under `go test ./...`: the package has no tests.
package bench
