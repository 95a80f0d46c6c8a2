package v1alpha1

// HasLocksLabel is the label lockguard's reconciler keeps, with the value
// "true", on every namespace that holds at least one live Lock, and removes
// from the others. The namespace webhook selects on it (objectSelector), so
// that deleting a namespace without Locks never waits on lockguard. It is
// only a hint of where to look: the webhook decides from the Locks.
const HasLocksLabel = Group + "/has-locks"

// ReasonNamespaceNotGuarded is the Ready reason of a Lock whose target
// carries the lock annotation (its delete is denied) while its namespace
// does not yet carry HasLocksLabel (deleting the namespace is not): the
// Lock is not active until both are enforced.
const ReasonNamespaceNotGuarded = "NamespaceNotGuarded"
