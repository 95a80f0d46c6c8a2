//go:build chaos

package chaos

import "sync/atomic"

// A deleteKind is one way a client asks for an object to be deleted. The
// checker holds every kind to the same invariant: a request that would
// delete (or, as a dry run, would have deleted) an object that a live Lock
// protects must be denied, and that object must still be there, the same
// object (same UID), every time the client looks at it again while the
// Lock lives.
//
// The table is where a new path slots in: once the guards of issue 12
// exist, a namespace delete while a Lock in it holds an existing target, a
// CRD delete while a Lock holds an object of its kind and an owner delete
// denied up front (rule 6) become rows here, each with a worker step that
// sends the request and judges it with judge (or deleteCollection's
// rule), and the same observe check on every object it could remove.
// Today those deletes do destroy locked objects, so the workload does not
// send them.
type deleteKind int

const (
	kindDelete             deleteKind = iota // DELETE of the object through the version it was created with
	kindDeleteOtherVersion                   // DELETE through another served version
	kindDryRun                               // server-side dry-run DELETE, through either version
	kindRaced                                // DELETE sent the moment the Lock's create was answered
	kindCollection                           // deletecollection of the kind in the namespace (kubectl delete --all)
	kindDryRunCollection                     // the same as a server-side dry run
	kindCascade                              // background DELETE of the owner: the garbage collector deletes the child
	numKinds

	// kindNone stands for no request of the client's: an object that
	// disappears without one went by some other path.
	kindNone = numKinds
)

// kinds describes each deleteKind, in the order the summary prints them.
var kinds = [numKinds + 1]struct {
	name   string
	dryRun bool
}{
	kindDelete:             {name: "delete"},
	kindDeleteOtherVersion: {name: "delete through v1beta1"},
	kindDryRun:             {name: "dry-run delete", dryRun: true},
	kindRaced:              {name: "delete right after Lock create"},
	kindCollection:         {name: "deletecollection"},
	kindDryRunCollection:   {name: "dry-run deletecollection", dryRun: true},
	kindCascade:            {name: "owner delete (GC cascade)"},
	kindNone:               {name: "no request of the client's"},
}

func (k deleteKind) String() string { return kinds[k].name }

// kindCounts are the counters of one deleteKind.
type kindCounts struct {
	// sent counts the requests sent.
	sent atomic.Int64
	// locked counts those that would delete (dry run: would have deleted)
	// an object a live Lock protected; for kindCascade, owner deletes
	// sent while the child was locked (the garbage collector's delete of
	// the child is the one lockguard must deny, out of the client's
	// sight: the child must survive).
	locked atomic.Int64
	// denied counts the locked requests lockguard denied.
	denied atomic.Int64
	// errors counts requests that failed otherwise (lockguard or the
	// API server unreachable: failing closed).
	errors atomic.Int64
	// violations counts the locked objects deleted, the locked requests
	// allowed, and the objects a dry run deleted.
	violations atomic.Int64
}
