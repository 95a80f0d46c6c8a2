// Package webhook implements lockguard's admission of Locks' targets and
// of Locks: it denies the DELETE of a core.navique.com resource while a
// live Lock in the same namespace targets it, and the deletes that would
// remove such a resource whatever its Locks: of an owner whose cascade
// would delete it, of its namespace (whose controller deletes the Locks
// too) and of its CustomResourceDefinition (whose objects go without
// admission). It also admits Lock CREATEs (create.go).
//
// The package holds the whole admission decision, one file a role:
//
//   - http.go serves every admission path, through internal/transport
//     (bounded reads, limits, the review's deadline); request.go decodes
//     what a decision reads of a review (skimmed by internal/skim);
//   - handler.go asks the guards in turn (decision.go: the guard
//     interface, and guardOf, which guard a request goes to): the object
//     guard (object.go), the cascade guard (cascadedecision.go, walking
//     cascade.go), the namespace guard (namespace.go) and the CRD guard
//     (crd.go, both over guards.go); the update guard (update.go,
//     updatesub.go) is the one guard of a Handler of its own, which
//     answers UPDATEs;
//   - reader.go is every guard's reader of Locks, and the one place that
//     says when a decision is confirmed with the API server: from an
//     informer cache (Locks, locks.go: the one read interface), and for
//     what the cache would allow, a consistent list of the API server
//     (lists.go, one in flight per namespace, shared); it fails closed
//     when either cannot answer;
//   - every decision, of every guard, ends in one step (handler.go,
//     finisher.finish): metrics.go, audit.go, events.go and denials.go
//     tell of it;
//   - create.go admits Lock CREATEs: the peer announcement and the
//     namespace guard's label, each when configured.
//
// It reads Lock objects, never the core.navique.com/locked annotation, so
// editing the annotation never unprotects anything. A delete decision
// writes nothing itself: a refusal that is not a dry run is handed to
// asynchronous recorders (events.go: Events; denials.go: the refusing
// Locks' and ClusterLocks' status.lastDenied, through a DenialRecorder);
// a Lock create's admission may label the Lock's namespace.
package webhook
