// Package controller is lockguard's reconciler: it keeps the
// core.navique.com/locked annotation on the targets of Locks, the
// has-locks label on their namespaces and the Locks' status. It runs on
// the leader only, and reads Locks from the read model
// (internal/readmodel), which it shares with the webhook.
//
// One level-based reconciler, keyed by target (namespace, group, kind,
// name), looks up the live Locks of the target once, sets the annotation
// to their sorted names (removing it when there are none), and then writes
// the status of those same Locks from the outcome: active once the
// annotation names them, MissingReference when the target or its kind does
// not exist, InvalidTarget for a cluster-scoped kind. A Lock whose target
// is invalid (another group, a Lock) is reconciled on its own, by name,
// as is a selector Lock. The status also says what each Lock covers now
// (status.protected, protected.go), by the webhook's own rule; the events
// between objects and selector Locks are mapped both ways in proportion
// to what they change (fanout.go). status.lastDenied is written by every
// replica (internal/denials), with the same resourceVersion precondition
// as this package's status writes, so neither erases the other's fields.
//
// Targets are watched metadata-only, for every namespaced kind of the
// core.navique.com group, so that annotations left behind while lockguard was
// down are cleaned once it runs again, and kinds whose CRD is installed later
// are picked up.
package controller
