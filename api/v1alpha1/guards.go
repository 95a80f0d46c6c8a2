package v1alpha1

import "time"

// HasLocksLabel is the label lockguard's reconciler keeps, with the value
// "true", on every namespace that holds at least one live Lock, and removes
// from the others. The namespace webhook selects on it (objectSelector), so
// that deleting a namespace without Locks never waits on lockguard. It is
// only a hint of where to look: the webhook decides from the Locks.
const HasLocksLabel = Group + "/has-locks"

// HasLocksPendingAnnotation is put with HasLocksLabel on a Lock's
// namespace by lockguard's admission of the Lock's create (value: the
// time, RFC 3339), before the create is allowed. The reconciler leaves
// the label of a namespace so marked for ProtectedPendingGrace even when
// no cached Lock is in it yet, and takes label and mark off together at
// the namespace's resourceVersion it judged: since each create writes a
// new mark, a create admitted after that read makes the API server refuse
// the removal (Conflict) rather than have it undone. The mark stays while
// the label does (no write to clear it).
const HasLocksPendingAnnotation = Group + "/has-locks-pending"

// ReasonNamespaceNotGuarded is the Ready reason of a Lock whose target
// carries the lock annotation (its delete is denied) while its namespace
// does not yet carry HasLocksLabel (deleting the namespace is not): the
// Lock is not active until both are enforced.
const ReasonNamespaceNotGuarded = "NamespaceNotGuarded"

// ProtectedLabel is the label lockguard keeps, with the value "true", on
// every object of an opted-in kind (docs/contract.md rule 21) that a live,
// enforcing Lock covers, and removes from the others. The chart's
// protect-locked entry selects on it (objectSelector, matched against the
// object as stored), so that the object's DELETE reaches lockguard from
// the moment its Lock's create returns: the protect entry's
// namespaceSelector (HasLocksLabel) is matched against the API server's
// namespace cache, which can lag the namespace's label (issue 40). The
// admission of a targetRef Lock's create puts it on the target before
// allowing the create (with ProtectedPendingAnnotation); the reconciler
// keeps it. Like HasLocksLabel it is only a hint of where to look: the
// webhook decides from the Locks. It is not the LockedAnnotation (the
// names of the Locks), which every covered object carries.
const ProtectedLabel = Group + "/protected"

// ProtectedPendingAnnotation is put with ProtectedLabel on a Lock's target
// by lockguard's admission of the Lock's create (value: the time, RFC
// 3339), before the create is allowed. The reconciler leaves the label of
// an object so marked for ProtectedPendingGrace even when no Lock covers it
// yet (the create it was put for may not have reached its cache), and
// removes the mark once a Lock covers the object.
const ProtectedPendingAnnotation = Group + "/protected-pending"

// ProtectedPendingGrace is how long ProtectedPendingAnnotation keeps a
// label that no Lock accounts for: longer than a webhook call may last
// (30 s at most), so the create it was put for has been stored or refused.
const ProtectedPendingGrace = time.Minute
