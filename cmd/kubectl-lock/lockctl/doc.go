// Package lockctl is the kubectl plugin for Locks: `kubectl lock`
// (cmd/kubectl-lock) creates a Lock on a core.navique.com resource and
// waits until it is active, `kubectl lock list` shows what is locked,
// `kubectl lock show` shows one Lock, `kubectl lock update` changes one,
// `kubectl lock why` shows which Locks would block deleting a resource, a
// namespace or a CRD, `kubectl lock exception` manages break-glass
// LockExceptions, `kubectl unlock` (cmd/kubectl-unlock) deletes the Locks
// that protect a resource and `kubectl lock unlock` one Lock by name, with
// the same code (deleteLocks). The commands that write take kubectl's
// --dry-run=server|client (dryrun.go). Each verb is its own cobra command in
// its own file, sharing the kubectl-style connection flags of Flags.
//
// It talks to the API server with client-go (discovery, a RESTMapper, the
// dynamic and metadata clients) and, for why, controller-runtime's client,
// the reader lockguard's guards take; why decides with lockguard's own
// webhook package. So the plugin adds no module to lockguard's.
package lockctl
