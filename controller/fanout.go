package controller

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// The fan-out between objects and selector Locks, both ways, kept
// proportionate to what an event changes. In a namespace with N objects
// (of a selector Lock's kinds) and M live selector Locks:
//
//   - an object created, deleted or relabelled enqueues its own pass
//     (its annotation) and the selector Locks whose selector matches its
//     old or new labels (their status.protected): M in-memory selector
//     checks, no API call, at most M+1 requests. Those Locks are enqueued
//     after protectedRecount, so that a burst of object events in the
//     namespace costs each of them one pass (O(N) in-memory, targetWatches.protected)
//     per protectedRecount, not one per event. An object's other changes
//     (annotations) enqueue its own pass alone;
//   - a Lock created, deleted or whose spec changes enqueues its own pass,
//     its namespace's label, and, for a selector Lock, the objects its
//     selector matches (covers, or covered while it was live: the
//     selector cannot change): N in-memory checks, one request per match;
//   - a Lock whose status alone changes (the reconciler's or a replica's
//     lastDenied write) enqueues its own pass alone.

// protectedRecount is how long after an object event the selector Locks
// that match it recount what they cover (targetWatches.protected): the events of a
// burst within it make one pass per Lock.
const protectedRecount = time.Second

// objectEvents is the handler of a target kind's metadata events.
type objectEvents struct {
	gk    schema.GroupKind
	locks *readmodel.LockIndex
	// seen reports whether a Lock's events find the kind's objects in
	// the metadata informer's store (targetWatches.sees): then a Lock
	// created after an object's create enqueues the object's pass itself,
	// and the create need not when the pass has nothing to do (idle).
	// nil: never.
	seen func() bool
}

var _ handler.TypedEventHandler[*metav1.PartialObjectMetadata, item] = objectEvents{}

// key is the request of o's own pass.
func (h objectEvents) key(o metav1.Object) request {
	return request{Target: lockv1alpha1.TargetKey{Namespace: o.GetNamespace(), Group: h.gk.Group, Kind: h.gk.Kind, Name: o.GetName()}}
}

// selectorLocks enqueues, after protectedRecount, the live selector Locks
// that match o with any of labels; through the paced backlog when o is of
// the initial list (initial: a start's objects would otherwise put every
// selector Lock in the queue at once, past it).
func (h objectEvents) selectorLocks(q workqueue.TypedRateLimitingInterface[item], o *metav1.PartialObjectMetadata, initial bool, labels ...map[string]string) {
	if h.locks == nil {
		return
	}
	objs := make([]lockv1alpha1.Object, 0, len(labels))
	for _, l := range labels {
		objs = append(objs, lockv1alpha1.Object{Namespace: o.Namespace, Group: h.gk.Group, Kind: h.gk.Kind, Name: o.Name, Labels: l})
	}
	for _, key := range h.locks.SelectorLocksCovering(objs...) {
		if initial {
			enqueue(q, true, request{Lock: key})
			continue
		}
		q.AddAfter(itemOf(request{Lock: key}), protectedRecount)
	}
}

// Create enqueues the object (paced when it is of the initial list,
// enqueue) and the selector Locks that cover it; not the object's own
// pass when it would have nothing to do (idle).
func (h objectEvents) Create(_ context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	if h.idle(e.Object) {
		return
	}
	enqueue(q, e.IsInInitialList, h.key(e.Object))
	h.selectorLocks(q, e.Object, e.IsInInitialList, e.Object.Labels)
}

// idle reports whether the pass of a new object o (reconcileTarget) would
// write nothing, so that its create need not enqueue it: o carries none
// of lockguard's marks (the lock annotation, the read-only and protected
// labels, the protected-pending mark), no Lock of the index names it
// (live or expired) or covers it, and the kind's objects are seen by the
// Lock events (seen). A Lock the index does not hold yet is
// delivered after o was stored, and its event finds o (requestsOfLock:
// its target, or targetsIn). Issue 38: at start every object of the group
// is created in the informers; most are not locked, and their passes
// would hold the work queue's maps at the size of the cluster for good.
//
// o is the event's object, or the object as the informer stores it (a
// readmodel.Meta: dropsAdd), read in place: one decision for both.
func (h objectEvents) idle(o metav1.Object) bool {
	if h.seen == nil || h.locks == nil || !h.locks.HasSynced() || !h.seen() {
		return false
	}
	for _, k := range []string{lockv1alpha1.LockedAnnotation, lockv1alpha1.ProtectedPendingAnnotation} {
		if _, ok := readmodel.AnnotationOf(o, k); ok {
			return false
		}
	}
	labels := readmodel.LabelsOf(o)
	for _, k := range []string{lockv1alpha1.ReadOnlyLabel, lockv1alpha1.ProtectedLabel} {
		if _, ok := labels.Label(k); ok {
			return false
		}
	}
	key := h.key(o).Target
	if named, err := h.locks.Names(key); err != nil || named {
		return false
	}
	covering, err := h.locks.LiveLocksCovering(lockv1alpha1.Object{Namespace: key.Namespace, Group: key.Group, Kind: key.Kind, Name: key.Name, LabelReader: labels})
	return err == nil && len(covering) == 0
}

// dropsAdd reports whether Create would drop the add of obj, an object as
// the kind's informer stores it (idle of a readmodel.Meta), so that the
// add need not be made the event's metav1.PartialObjectMetadata first
// (convertedEvents). Issue 38: the start's adds of a million objects no
// Lock concerns were each converted, a map of their labels included,
// only to be dropped: 39 MB of the start's heap at its peak (run AC).
func (h objectEvents) dropsAdd(obj any) bool {
	m, ok := obj.(*readmodel.Meta)
	return ok && h.idle(m)
}

// Update enqueues the object, and, when its labels changed, the selector
// Locks that covered it or cover it now.
func (h objectEvents) Update(_ context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	q.Add(itemOf(h.key(e.ObjectNew)))
	if !labelsEqual(e.ObjectOld.Labels, e.ObjectNew.Labels) {
		h.selectorLocks(q, e.ObjectNew, false, e.ObjectOld.Labels, e.ObjectNew.Labels)
	}
}

// Delete enqueues the object and the selector Locks that covered it.
func (h objectEvents) Delete(_ context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	q.Add(itemOf(h.key(e.Object)))
	h.selectorLocks(q, e.Object, false, e.Object.Labels)
}

// Generic enqueues the object.
func (h objectEvents) Generic(_ context.Context, e event.TypedGenericEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	q.Add(itemOf(h.key(e.Object)))
}

// labelsEqual reports whether a and b hold the same labels.
func labelsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// lockEvents is the handler of Lock events: requestsOfLock, except for an
// update of the status alone, which enqueues the Lock's own pass.
type lockEvents struct{ r *reconciler }

var _ handler.TypedEventHandler[*lockv1alpha1.Lock, item] = lockEvents{}

// addAll enqueues requestsOfLock of l, paced when l is of the initial
// list (enqueue).
func (h lockEvents) addAll(ctx context.Context, q workqueue.TypedRateLimitingInterface[item], l *lockv1alpha1.Lock, initial bool) {
	enqueue(q, initial, h.r.requestsOfLock(ctx, l)...)
}

// Create enqueues requestsOfLock.
func (h lockEvents) Create(ctx context.Context, e event.TypedCreateEvent[*lockv1alpha1.Lock], q workqueue.TypedRateLimitingInterface[item]) {
	h.addAll(ctx, q, e.Object, e.IsInInitialList)
}

// Update enqueues requestsOfLock, or, when only the status changed, the
// Lock's own pass (requestOf), which checks the status again.
func (h lockEvents) Update(ctx context.Context, e event.TypedUpdateEvent[*lockv1alpha1.Lock], q workqueue.TypedRateLimitingInterface[item]) {
	o, n := e.ObjectOld, e.ObjectNew
	if o.Generation == n.Generation && (o.DeletionTimestamp == nil) == (n.DeletionTimestamp == nil) {
		q.Add(itemOf(requestOf(n)))
		return
	}
	h.addAll(ctx, q, n, false)
}

// Delete enqueues requestsOfLock.
func (h lockEvents) Delete(ctx context.Context, e event.TypedDeleteEvent[*lockv1alpha1.Lock], q workqueue.TypedRateLimitingInterface[item]) {
	h.addAll(ctx, q, e.Object, false)
}

// Generic enqueues requestsOfLock.
func (h lockEvents) Generic(ctx context.Context, e event.TypedGenericEvent[*lockv1alpha1.Lock], q workqueue.TypedRateLimitingInterface[item]) {
	h.addAll(ctx, q, e.Object, false)
}
