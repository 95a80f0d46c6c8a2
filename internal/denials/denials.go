// Package denials writes status.lastDenied on the Locks and ClusterLocks
// that refuse requests (docs/contract.md rules 14 and 22; issue 24's "who
// tried"): the last refused request (time, user, operation, kind and name
// of the object) and how many the Lock has refused. A ClusterLock's status
// is a Lock's, and is written the same way, through the same Recorder
// (RecordClusterDenial), within the same bounds; below, "Lock" stands for
// either.
//
// Every replica serves the webhook, so every replica runs a Recorder and
// writes the denials it decided itself, leader or not. The webhook hands
// each refusal to RecordDenial, which only updates an entry in memory (one
// per Lock: the last denial and the count not yet written), so the
// admission path never waits for a write. A loop writes each Lock's
// entry at most once per Interval: the first refusal of a quiet Lock at
// once, the ones that follow within Interval together, adding the pending
// count to the Lock's count as the API server has it. A delete loop makes
// one status write per Lock per Interval, not one per request.
//
// A write is a JSON merge patch of status.lastDenied alone, with the
// Lock's resourceVersion as a precondition: a conflict (another replica's
// write, or the reconciler's) reads the Lock again from the API server and
// tries again, at most MaxAttempts times, so that two replicas add their
// counts rather than overwrite each other's. The reconciler writes the
// rest of the status with the same precondition (controller/status.go),
// so neither writer erases the other's fields.
//
// The counts are best-effort: the pending count of a replica that stops
// before its next write is lost, and a flush that fails MaxAttempts times
// keeps its count for the next one. Memory is bounded by one entry per
// Lock that refused something within the last Interval; the entry of a
// Lock that is gone (or was recreated: another UID) is dropped at its
// next write. Dry-run requests are never recorded (the webhook does not
// call RecordDenial for them: the webhook declares sideEffects
// NoneOnDryRun).
package denials

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// DefaultInterval is how often, at most, a Lock's lastDenied is written by
// one replica, by default (lockguard's --denial-flush-interval).
const DefaultInterval = 5 * time.Second

// MaxAttempts is how many times one flush of a Lock's entry tries to write
// it, reading the Lock again from the API server after each conflict.
const MaxAttempts = 5

// maxWritesPerSecond bounds the status writes of one Recorder over every
// Lock together, so that a refusal that names many Locks (a namespace
// delete) spreads its writes out; the entries wait, in bounded memory.
const maxWritesPerSecond = 50

// Options configure a Recorder.
type Options struct {
	// Interval is how often, at most, the Recorder writes one Lock's
	// lastDenied. Default DefaultInterval.
	Interval time.Duration
	// Metrics, when set, count the Recorder's writes.
	Metrics *Metrics
	// WouldDeny makes the Recorder write status.lastWouldDeny, the
	// requests audit Locks would have refused (docs/contract.md rule 20),
	// rather than status.lastDenied, the same way.
	WouldDeny bool
	// Exceptions makes the Recorder write status.lastException, the
	// requests LockExceptions let through the Lock (docs/contract.md rule
	// 20), the same way.
	Exceptions bool
}

// Recorder keeps the refusals of each Lock in memory and writes them to
// the Lock's status.lastDenied asynchronously (the package comment).
// Start runs its writes; it runs on every replica.
type Recorder struct {
	writer   client.Client // patches the status; reads Locks from its cache
	api      client.Reader // reads Locks from the API server after a conflict
	interval time.Duration
	metrics  *Metrics
	// wouldDeny: the Recorder writes status.lastWouldDeny
	// (Options.WouldDeny).
	wouldDeny bool
	// exceptions: the Recorder writes status.lastException
	// (Options.Exceptions).
	exceptions bool
	limiter    *rate.Limiter
	now        func() time.Time

	mu      sync.Mutex
	entries map[key]*entry
	wake    chan struct{}
}

// key names the Lock, or the ClusterLock (cluster: its Namespace is
// empty), of an entry.
type key struct {
	cluster bool
	types.NamespacedName
}

// noun is "Lock" or "ClusterLock", as logs and errors name k's kind.
func (k key) noun() string {
	if k.cluster {
		return "ClusterLock"
	}
	return "Lock"
}

// object returns an empty object of k's kind to read it into, and its
// status.
func (k key) object() (client.Object, *lockv1alpha1.LockStatus) {
	if k.cluster {
		c := &lockv1alpha1.ClusterLock{}
		return c, &c.Status
	}
	l := &lockv1alpha1.Lock{}
	return l, &l.Status
}

// entry is what a Recorder holds for one Lock.
type entry struct {
	uid types.UID
	// last is the last refusal recorded; its Count is unused.
	last lockv1alpha1.DeniedRequest
	// pending is how many refusals are not written yet.
	pending int64
	// written is when the entry was last written (or given up); zero:
	// never.
	written time.Time
}

// New returns a Recorder that writes Lock status through c (whose reads
// of Locks may come from a cache) and reads Locks again through api (a
// reader of the API server) when a write conflicts.
func New(c client.Client, api client.Reader, o Options) *Recorder {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	return &Recorder{
		writer:     c,
		api:        api,
		interval:   o.Interval,
		metrics:    o.Metrics,
		wouldDeny:  o.WouldDeny,
		exceptions: o.Exceptions,
		limiter:    rate.NewLimiter(maxWritesPerSecond, maxWritesPerSecond),
		now:        time.Now,
		entries:    map[key]*entry{},
		wake:       make(chan struct{}, 1),
	}
}

// RecordDenial records that locks refused the request denied (its Count
// is ignored: each call counts one refusal per Lock). It only updates
// memory and never blocks on the API server.
func (r *Recorder) RecordDenial(locks []lockv1alpha1.Lock, denied lockv1alpha1.DeniedRequest) {
	r.record(len(locks), func(i int) (key, types.UID) {
		return key{NamespacedName: types.NamespacedName{Namespace: locks[i].Namespace, Name: locks[i].Name}}, locks[i].UID
	}, denied)
}

// RecordClusterDenial records that the ClusterLocks locks refused the
// request denied, as RecordDenial does for Locks: the same entries,
// interval and write limit.
func (r *Recorder) RecordClusterDenial(locks []lockv1alpha1.ClusterLock, denied lockv1alpha1.DeniedRequest) {
	r.record(len(locks), func(i int) (key, types.UID) {
		return key{cluster: true, NamespacedName: types.NamespacedName{Name: locks[i].Name}}, locks[i].UID
	}, denied)
}

// record counts one refusal, denied, on each of the n Locks that lock
// names (their key and UID).
func (r *Recorder) record(n int, lock func(int) (key, types.UID), denied lockv1alpha1.DeniedRequest) {
	if n == 0 {
		return
	}
	denied = bounded(denied)
	r.mu.Lock()
	for i := range n {
		k, uid := lock(i)
		e := r.entries[k]
		if e == nil || (e.uid != uid && uid != "") {
			// New, or a Lock of the same name recreated: its count starts
			// again.
			e = &entry{uid: uid}
			r.entries[k] = e
		}
		e.last, e.pending = denied, e.pending+1
	}
	r.mu.Unlock()
	r.metrics.recorded(n)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// bounded is d with its strings cut to the lengths the Lock CRD accepts,
// so that a long user name never makes the write fail.
func bounded(d lockv1alpha1.DeniedRequest) lockv1alpha1.DeniedRequest {
	d.User, d.Operation, d.Kind, d.Name = truncate(d.User, 512), truncate(d.Operation, 16), truncate(d.Kind, 63), truncate(d.Name, 253)
	d.Exception = truncate(d.Exception, 253)
	return d
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// Pending returns how many Locks have refusals not written yet, and how
// many entries the Recorder holds in all.
func (r *Recorder) Pending() (pending, entries int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if e.pending > 0 {
			pending++
		}
	}
	return pending, len(r.entries)
}
