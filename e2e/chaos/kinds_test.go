//go:build chaos

package chaos

import "sync/atomic"

// A deleteKind is one way a client asks for an object to be deleted (or,
// for the update kinds, changed under a ReadOnly Lock). The
// checker holds every kind to the same invariant: a request that would
// delete (or, as a dry run, would have deleted) an object that a live Lock
// protects must be denied, and that object must still be there, the same
// object (same UID), every time the client looks at it again while the
// Lock lives.
//
// The table is where a new path slots in. The deletes that remove many
// objects at once (a namespace, a CRD, an owner with each propagation
// policy) are sent by the bigWorker (bigdeletes_test.go), in namespaces and
// kinds of its own so that the rest of the run is not disturbed.
type deleteKind int

const (
	kindDelete             deleteKind = iota // DELETE of the object through the version it was created with
	kindDeleteOtherVersion                   // DELETE through another served version
	kindDryRun                               // server-side dry-run DELETE, through either version
	kindRaced                                // DELETE sent the moment the Lock's create was answered
	kindCollection                           // deletecollection of the kind in the namespace (kubectl delete --all)
	kindDryRunCollection                     // the same as a server-side dry run
	kindCascade                              // background DELETE of the owner: the garbage collector deletes the child
	kindNamespace                            // DELETE of a namespace (docs/contract.md rule 11)
	kindCRD                                  // DELETE of a core.navique.com CustomResourceDefinition (rule 12)
	kindOwnerBackground                      // DELETE of a locked object's owner, propagation Background (rule 6)
	kindOwnerForeground                      // the same, propagation Foreground
	kindOwnerOrphan                          // the same, propagation Orphan: the child is never deleted
	kindUpdate                               // UPDATE of the spec of an object a ReadOnly Lock covers (rule 16)
	kindDryRunUpdate                         // the same as a server-side dry run
	kindRelabel                              // UPDATE of the selector label of an object a ReadOnly Lock covers: relabelling it out is refused too
	kindPVCDelete                            // DELETE of an opted-in PersistentVolumeClaim (rule 21; optin_test.go)
	kindPVCDryRun                            // the same as a server-side dry run
	kindPVCRaced                             // the same, sent the moment the Lock's create was answered
	kindCLNamespace                          // DELETE of a Namespace a ClusterLock names (rule 22; clusterlocks_test.go)
	kindCLDryRun                             // the same as a server-side dry run
	kindCLRaced                              // the same, sent the moment the ClusterLock's create was answered
	numKinds

	// kindNone stands for no request of the client's: an object that
	// disappears without one went by some other path.
	kindNone = numKinds
)

// kinds describes each deleteKind, in the order the summary prints them.
var kinds = [numKinds + 1]struct {
	name   string
	dryRun bool
	// owner marks the deletes of a locked object's owner: the client sees
	// the owner's answer, not the garbage collector's delete of the locked
	// child. An allowed owner delete is not (yet) a violation: rule 6's
	// cascade guard, which denies it up front, is not on main; the child
	// must survive either way.
	owner bool
	// harmless marks a kind that deletes no locked object even with no
	// guard at all (Orphan leaves the child): the self-test cannot catch it.
	harmless bool
	// update marks the kinds that change an object a ReadOnly Lock freezes
	// rather than delete it. The checker holds them to rule 16: once the
	// Lock's ReadOnly condition says InForce for its generation and the
	// object carries the read-only label, the update must be refused. The
	// self-test cannot catch them: without lockguard no Lock is ever in
	// force.
	update bool
}{
	kindDelete:             {name: "delete"},
	kindDeleteOtherVersion: {name: "delete through v1beta1"},
	kindDryRun:             {name: "dry-run delete", dryRun: true},
	kindRaced:              {name: "delete right after Lock create"},
	kindCollection:         {name: "deletecollection"},
	kindDryRunCollection:   {name: "dry-run deletecollection", dryRun: true},
	kindCascade:            {name: "owner delete (GC cascade)", owner: true},
	kindNamespace:          {name: "namespace delete"},
	kindCRD:                {name: "CRD delete"},
	kindOwnerBackground:    {name: "owner delete, Background", owner: true},
	kindOwnerForeground:    {name: "owner delete, Foreground", owner: true},
	kindOwnerOrphan:        {name: "owner delete, Orphan", owner: true, harmless: true},
	kindUpdate:             {name: "spec update under ReadOnly", update: true},
	kindDryRunUpdate:       {name: "dry-run spec update, ReadOnly", dryRun: true, update: true},
	kindRelabel:            {name: "relabel under ReadOnly", update: true},
	kindPVCDelete:          {name: "PVC delete (opt-in)"},
	kindPVCDryRun:          {name: "PVC dry-run delete (opt-in)", dryRun: true},
	kindPVCRaced:           {name: "PVC delete right after Lock"},
	kindCLNamespace:        {name: "namespace delete (ClusterLock)"},
	kindCLDryRun:           {name: "ns dry-run delete (ClusterLock)", dryRun: true},
	kindCLRaced:            {name: "ns delete after ClusterLock"},
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
	// denied counts the locked requests lockguard denied (for an owner
	// delete, by rule 6's cascade guard).
	denied atomic.Int64
	// allowed counts the locked requests answered with success: a
	// violation, except for an owner delete (see kinds' owner).
	allowed atomic.Int64
	// errors counts requests that failed otherwise (lockguard or the
	// API server unreachable: failing closed).
	errors atomic.Int64
	// violations counts the locked objects deleted, the locked requests
	// allowed, and the objects a dry run deleted.
	violations atomic.Int64
	// bySelector counts the locked requests for which a selector Lock was
	// among the Locks that protected (or froze) the object, and
	// selectorDenied those of them lockguard denied (a subset).
	bySelector, selectorDenied atomic.Int64
	// byReadOnly counts the locked requests for which a ReadOnly Lock was
	// among them, and readOnlyDenied those of them lockguard denied (a
	// subset).
	byReadOnly, readOnlyDenied atomic.Int64
}
