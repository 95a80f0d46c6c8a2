// Package webhook implements lockguard's validating admission handler: it
// denies the DELETE of a core.navique.com resource while a live Lock in the
// same namespace targets it, and the deletes that would remove such a
// resource whatever its Locks: of its namespace (whose controller deletes
// the Locks too) and of its CustomResourceDefinition (whose objects go
// without admission), in guards.go.
//
// The package holds the whole admission decision: which requests Locks
// decide (Decide), the lookup of the Locks in an informer cache (a
// LockIndex), the confirmation of allowed deletes with the API server (a
// LockLister), and failing closed when either cannot answer. It reads
// Lock objects, never the core.navique.com/locked annotation, so editing
// the annotation never unprotects anything; and it writes nothing.
package webhook
