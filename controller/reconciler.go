package controller

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unique"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// unservedKindRecheck is how often the Locks of a kind that is not served
// check again, so that a CRD installed later is picked up.
const unservedKindRecheck = 10 * time.Second

// request is what the reconciler reconciles: an object Locks may cover,
// or, for a selector Lock or a Lock whose target is invalid (Lock.Target
// fails), that Lock alone.
type request struct {
	// Target is the object whose annotation, and whose targetRef Locks'
	// status, a pass writes.
	Target lockv1alpha1.TargetKey
	// Lock, when set, is a selector Lock or a Lock whose target is
	// invalid: a pass writes its status.
	Lock types.NamespacedName
	// Namespace, when set, is a namespace whose HasLocksLabel a pass writes.
	Namespace string
}

// requestOf returns the request that reconciles Lock l: its target's,
// whether or not the Lock is live (a Lock being deleted leaves its
// target's annotation), or its own if it is a selector Lock or its target
// is invalid.
func requestOf(l *lockv1alpha1.Lock) request {
	if target, err := l.Target(); err == nil {
		return request{Target: target}
	}
	return request{Lock: client.ObjectKeyFromObject(l)}
}

// reconciler keeps, in one pass per target, the LockedAnnotation on the
// target equal to the sorted, comma-separated names of the live Locks that
// target it (absent when there are none), and then writes the status of
// those same Locks from the outcome: the annotation and the status are
// computed from one lookup, so they cannot disagree. It patches only the
// target's metadata and the Locks' status.
type reconciler struct {
	client  client.Client
	locks   *readmodel.LockIndex
	kinds   *readmodel.Kinds
	watches *targetWatches
	events  events.EventRecorder
	// namespaceGuard: the namespace label is kept, and a Lock is active
	// only once its namespace carries it.
	namespaceGuard bool
	// namespaces, when set, is the store namespaceLabel reads a
	// namespace's label from (nil: through client).
	namespaces namespaceStore
	// pending, when set, keeps a namespace's label while a Lock create in
	// it is pending (Options.Pending).
	pending PendingLocks
	// readOnlyGuard: lockguard serves the update guard, so a ReadOnly
	// Lock's freeze can be in force (Options.DisableReadOnlyGuard).
	readOnlyGuard bool
	// labels are the label keys the cache keeps of namespaced objects
	// (Options.LabelKeys).
	labels *readmodel.LabelKeys
	// now is the clock Locks are live by: the Lock index's
	// (readmodel.LockIndex.Now), so that a pass and the index agree.
	now func() time.Time
}

// item is a request as the controller's work queue holds it: a handle of
// its value (unique.Make), one pointer. The queue's maps, and its
// metrics', keep the size of their largest burst (the start's pass over
// every Lock) for good: keyed by the request itself, seven strings, they
// held about 980 bytes per Lock at 100,000 Locks (issue 38).
type item = unique.Handle[request]

// itemOf returns the queue's item of req.
func itemOf(req request) item { return unique.Make(req) }

// Reconcile reconciles the request of it (reconcile).
func (r *reconciler) Reconcile(ctx context.Context, it item) (ctrl.Result, error) {
	return r.reconcile(ctx, it.Value())
}

// reconcile brings the target of req (or the Lock of req) in line with the
// live Locks.
func (r *reconciler) reconcile(ctx context.Context, req request) (ctrl.Result, error) {
	if req.Namespace != "" {
		return r.reconcileNamespace(ctx, req.Namespace)
	}
	if req.Lock.Name != "" {
		return r.reconcileLock(ctx, req.Lock)
	}
	return r.reconcileTarget(ctx, req.Target)
}

// reconcileLock writes the status of a Lock whose scope is invalid
// (InvalidTarget, with the reason; it covers nothing; checked again at its
// expiry), or of a live
// selector Lock: active once its namespace is guarded, and what it covers
// (targetWatches.protected); InvalidTarget, with what it still covers,
// while one of its kinds is not served as written (selectorKinds: checked
// again after the returned delay). The objects a selector Lock covers get
// their annotation from their own passes (requestsOfLock).
func (r *reconciler) reconcileLock(ctx context.Context, name types.NamespacedName) (ctrl.Result, error) {
	var lock lockv1alpha1.Lock
	if err := r.client.Get(ctx, name, &lock); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lock.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // It is going away.
	}
	now := r.now()
	if lock.ExpiredAt(now) {
		return ctrl.Result{}, r.writeStatus(ctx, &lock, expiredObservation(&lock))
	}
	if err := lock.Scope(); err != nil {
		// Back at its expiry, if it has one, to say Expired (rule 19):
		// nothing else would bring an invalid Lock back.
		return ctrl.Result{RequeueAfter: soonest(0, now, []lockv1alpha1.Lock{lock})},
			r.writeStatus(ctx, &lock, observation{reason: lockv1alpha1.ReasonInvalidTarget, message: err.Error()})
	}
	if !lock.HasSelector() {
		return ctrl.Result{}, nil // Its target's pass writes its status.
	}
	unserved, recheck, err := selectorKinds(r.kinds, lock.Spec.Selector)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !r.labels.Complete(lock.Namespace) {
		// The cache is storing the namespace's objects again with a label
		// that a selector Lock (this one, most likely) reads: until then
		// it would count too few. Their updates bring the Lock back too.
		return ctrl.Result{RequeueAfter: labelRefreshWait}, nil
	}
	protected, unlabelled := protectedNone(), 0
	if r.watches != nil {
		if protected, unlabelled, err = r.watches.protected(&lock); err != nil {
			return ctrl.Result{}, err
		}
	}
	frozen := selectorFrozen(protected.Count, unlabelled)
	obs := observation{active: true, reason: lockv1alpha1.ReasonActive, protected: protected, readOnly: frozen}
	if r.namespaceGuard {
		// The Lock is live, unserved kinds or not: the namespace guard
		// counts it.
		guarded, err := r.ensureNamespaceLabel(ctx, lock.Namespace, true)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !guarded {
			// The namespace watch reconciles the Lock again once labelled.
			obs = notGuarded(lock.Namespace).covering(protected).freezing(frozen)
		}
	}
	if unserved != "" {
		// Not active, whatever else holds; it still covers what it
		// covers (selectorkinds.go).
		obs = observation{reason: lockv1alpha1.ReasonInvalidTarget, message: unserved, protected: protected, readOnly: frozen, live: true}
	}
	return ctrl.Result{RequeueAfter: soonest(recheck, now, []lockv1alpha1.Lock{lock})}, r.writeStatus(ctx, &lock, obs)
}

// labelRefreshWait is how soon a selector Lock's pass comes back while
// the cache refreshes the labels of its namespace's objects.
const labelRefreshWait = 250 * time.Millisecond

// notGuarded is the observation of a Lock whose namespace does not carry
// HasLocksLabel yet.
func notGuarded(ns string) observation {
	return observation{reason: lockv1alpha1.ReasonNamespaceNotGuarded, message: fmt.Sprintf(
		"waiting for namespace %q to carry the label %s=true, so that deleting the namespace is denied too", ns, lockv1alpha1.HasLocksLabel)}
}

// targetReadTimeout bounds a target's read from the cache, which waits
// until the kind's informer has synced.
const targetReadTimeout = 10 * time.Second

// unsynced reports whether err, a target's read, is the cache's timeout
// waiting for kind k's informer to sync (apierrors.IsTimeout), and k's
// informer still has not.
func (r *reconciler) unsynced(ctx context.Context, k readmodel.ServedKind, err error) bool {
	if !apierrors.IsTimeout(err) {
		return false
	}
	synced, serr := r.watches.synced(ctx, k)
	return serr == nil && !synced
}

// reconcileTarget patches the annotation of target (the live Locks that
// cover it: its targetRef Locks and the selector Locks that match its
// labels), then writes the status of its live targetRef Locks: each covers
// the target when it exists, nothing otherwise. The status of its expired
// targetRef Locks says Expired (expiredObservation). The pass comes back
// when the first of the Locks it read expires (soonest), so that the
// annotation loses an expired Lock at its expiry.
func (r *reconciler) reconcileTarget(ctx context.Context, target lockv1alpha1.TargetKey) (ctrl.Result, error) {
	expired, err := r.locks.ExpiredLocks(target)
	if err != nil {
		return ctrl.Result{}, err
	}
	for i := range expired {
		if err := r.writeStatus(ctx, &expired[i], expiredObservation(&expired[i])); err != nil {
			return ctrl.Result{}, err
		}
	}
	now := r.now()
	locks, err := r.locks.LiveLocks(target)
	if err != nil {
		return ctrl.Result{}, err
	}
	kind, obs, recheck, err := resolveTarget(r.kinds, target)
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case obs != nil && len(locks) == 0:
		// Nothing to annotate, and no Lock to tell.
		return ctrl.Result{}, nil
	case obs != nil:
		return ctrl.Result{RequeueAfter: soonest(recheck, now, locks)}, r.writeStatuses(ctx, locks, *obs)
	}
	gk := target.GroupKind()
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(kind.GVK)
	// The read waits for the kind's cache to sync: bounded, so that a kind
	// whose list never succeeds holds no worker for good.
	getCtx, cancel := context.WithTimeout(ctx, targetReadTimeout)
	err = r.client.Get(getCtx, types.NamespacedName{Namespace: target.Namespace, Name: target.Name}, obj)
	cancel()
	if r.unsynced(ctx, kind, err) {
		// The kind's first list is still loading (minutes at a million
		// objects): not an error. Kind discovery says so once per kind.
		ctrl.LoggerFrom(ctx).V(1).Info("The target's kind has not synced yet; reading it again later", "kind", gk, "after", targetReadTimeout)
		return ctrl.Result{RequeueAfter: targetReadTimeout}, nil
	}
	if client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("getting %s %s/%s: %w", gk, target.Namespace, target.Name, err)
	}
	// The kind's informer has synced: the read came from it. Its watch is
	// added only now (kindWatches: a watch is added once its kind has
	// synced; the source of a kind that never syncs would wait without
	// end). Its first adds bring a pass to every object, so nothing changed
	// between this read and the watch is missed.
	if err := r.watches.ensure(ctx, kind); err != nil {
		return ctrl.Result{}, err
	}
	if err != nil {
		return ctrl.Result{RequeueAfter: soonest(0, now, locks)}, r.writeStatuses(ctx, locks, observation{reason: lockv1alpha1.ReasonMissingReference,
			message: MissingMessage(target.Kind, target.Name, target.Namespace)})
	}
	// The live Locks that cover the target: its targetRef Locks, locks as
	// read above (one read, whose status this pass writes last), and the
	// selector Locks its labels match.
	covering, err := r.locks.LiveLocksCoveringWith(lockv1alpha1.Object{
		Namespace: target.Namespace, Group: target.Group, Kind: target.Kind, Name: target.Name, Labels: obj.Labels}, locks)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The annotation names only the Locks that refuse (enforcingNames): policy
	// mode's ValidatingAdmissionPolicy denies from it, and an audit Lock
	// refuses nothing (docs/contract.md rule 20). The protected label is
	// wanted exactly where the annotation is (protectedlabel.go).
	refusing := enforcingNames(covering, now)
	want := annotationValue(refusing)
	protected, pendingLeft := protectedLabelChange(kind.GVK.Group != lockv1alpha1.Group, refusing, obj.Labels, obj.Annotations, now)
	// Back at the first expiry of a Lock that covers the target, or when
	// a pending mark's grace ends.
	next := ctrl.Result{RequeueAfter: soonest(pendingLeft, now, locks, covering)}
	// The read-only label still routes the updates an audit ReadOnly Lock
	// covers to the update guard, which allows them with its would-deny
	// warning.
	readOnly := readOnlyCovered(covering)
	label := labelChange(obj.Labels, readOnly)
	if got, has := obj.Annotations[lockv1alpha1.LockedAnnotation]; has != (want != "") || got != want || label != nil || !protected.none() {
		// One patch for the annotation and the labels.
		if err := r.client.Patch(ctx, obj, metadataPatch(want, label, protected, obj.ResourceVersion)); apierrors.IsConflict(err) {
			// The protected label's removal met a write since the cache's
			// read (a Lock create's label and mark, perhaps): judged again
			// from the next read.
			return ctrl.Result{RequeueAfter: conflictRecheck}, nil
		} else if err != nil {
			// Not found: the target's delete event reconciles it again.
			return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("patching the %s annotation and %s label of %s %s/%s: %w",
				lockv1alpha1.LockedAnnotation, lockv1alpha1.ReadOnlyLabel, gk, target.Namespace, target.Name, err))
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Updated the lock annotation", "from", got, "to", want, "readOnly", readOnly, "protected", protected.label)
	}
	// The target now carries the label exactly when ReadOnly Locks cover
	// it: the freeze of its ReadOnly targetRef Locks is in force.
	frozen := readOnlyObservation{frozen: readOnly}
	if r.namespaceGuard && len(covering) > 0 {
		// The namespace's label, ensured here too so that a new Lock turns
		// active in one pass. covering are live Locks of the namespace, so
		// the label is wanted: no need to look through the namespace's
		// other Locks (which would make n targets cost n²).
		guarded, err := r.ensureNamespaceLabel(ctx, target.Namespace, true)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !guarded {
			// The namespace watch reconciles the target again once labelled.
			return next, r.writeStatuses(ctx, locks, notGuarded(target.Namespace).covering(protectedTarget(target)).freezing(frozen))
		}
	}
	return next, r.writeStatuses(ctx, locks, observation{active: true, reason: lockv1alpha1.ReasonActive, protected: protectedTarget(target), readOnly: frozen})
}

// resolveTarget decides what a pass over target can do: annotate the
// target, of the returned served kind, or, when the group serves no kind
// spelled exactly as target's (readmodel.Kinds.Lockable, the resolution
// selector kinds share: selectorKinds), tell its Locks obs (and check
// again after recheck, when that is not zero). Only an exact spelling
// resolves, so a Lock is active only where a DELETE of the served kind
// finds it in the Lock index.
func resolveTarget(kinds *readmodel.Kinds, target lockv1alpha1.TargetKey) (readmodel.ServedKind, *observation, time.Duration, error) {
	gk := target.GroupKind()
	kind, err := kinds.Lockable(target.Kind)
	if err == nil && kind.GVK.Group != gk.Group {
		// The Kind is served in another group (an opted-in kind's name
		// under core.navique.com, or the reverse): not this target's.
		err = readmodel.ErrKindNotServed
	}
	var misspelled *readmodel.MisspelledKindError
	var clusterScoped *readmodel.ClusterScopedKindError
	switch {
	case errors.As(err, &misspelled):
		// Rechecked: a kind spelled like this may be installed later.
		return readmodel.ServedKind{}, &observation{reason: lockv1alpha1.ReasonInvalidTarget, message: fmt.Sprintf(
			"%s (targetRef cannot be changed: create a Lock of kind %s, then delete this one)", misspelled, misspelled.Served)}, unservedKindRecheck, nil
	case errors.Is(err, readmodel.ErrKindNotServed):
		return readmodel.ServedKind{}, &observation{reason: lockv1alpha1.ReasonMissingReference, message: fmt.Sprintf(
			"no kind %s is served by the API server; the Lock becomes active when the kind is installed and %s %q exists", gk, target.Kind, target.Name)}, unservedKindRecheck, nil
	case errors.As(err, &clusterScoped):
		return readmodel.ServedKind{}, &observation{reason: lockv1alpha1.ReasonInvalidTarget, message: clusterScoped.Error()}, 0, nil
	case err != nil:
		return readmodel.ServedKind{}, nil, 0, fmt.Errorf("resolving kind %s: %w", gk, err)
	}
	return kind, nil, 0, nil
}

// writeStatuses writes obs into the status of each Lock, and returns the
// errors joined.
func (r *reconciler) writeStatuses(ctx context.Context, locks []lockv1alpha1.Lock, obs observation) error {
	var errs []error
	for i := range locks {
		errs = append(errs, r.writeStatus(ctx, &locks[i], obs))
	}
	return errors.Join(errs...)
}
