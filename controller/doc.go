// Package controller keeps the core.navique.com/locked annotation on the
// targets of Locks and the Locks' status, and provides the index of Locks
// by target that the admission webhook and the reconcilers look Locks up in
// (LockIndex).
//
// Two level-based reconcilers share the manager's cache:
//
//   - the target reconciler, keyed by target (namespace, group, kind, name),
//     sets the annotation to the sorted names of the live Locks that target
//     the object and removes it when there are none;
//   - the Lock reconciler, keyed by Lock, writes the Lock's status from the
//     target's existence and annotation.
//
// Targets are watched metadata-only, for every namespaced kind of the
// core.navique.com group, so that annotations left behind while lockguard was
// down are cleaned once it runs again, and kinds whose CRD is installed later
// are picked up.
package controller
