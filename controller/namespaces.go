package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// The namespace label: the reconciler keeps HasLocksLabel="true" on each
// namespace that holds a live Lock, and on no other, so that the namespace
// guard's webhook entry (objectSelector) sees only those and a namespace
// without Locks is never held up by lockguard. It is level-based: put back
// if removed, removed with the last live Lock, no write when it is right.
// A terminating namespace is left alone: its Locks are being deleted, and
// its delete has already been decided. The replica that admits a Lock
// create puts the label on first, before allowing the create
// (webhook/create.go); without Options.Pending, the reconciler may take
// it off again until the Lock reaches its cache.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;patch

// NamespaceObject returns the metadata-only Namespace ns, as the
// reconciler and the Event sink (cmd/lockguard/manager) read it.
func NamespaceObject(ns string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	obj.SetName(ns)
	return obj
}

// reconcileNamespace puts HasLocksLabel on namespace ns, or removes it
// (removeNamespaceLabel), as its live Locks say. A namespace that is gone
// or terminating is left as it is.
//
// It looks through the Locks of ns, so it runs on namespace events only; a
// target's pass, which already holds live Locks of ns, calls
// ensureNamespaceLabel with want true instead. Calling this per target
// made a start with n Locks in one namespace cost n² (100,000 Locks: still
// busy after 5 minutes, make bench at c16041e).
func (r *reconciler) reconcileNamespace(ctx context.Context, ns string) (ctrl.Result, error) {
	if !r.locks.HasSynced() {
		return ctrl.Result{}, readmodel.ErrNotSynced
	}
	// Read before the Locks are: a removal is made at this version.
	obj := NamespaceObject(ns)
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	want, err := r.locks.HasLiveLocksIn(ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !want {
		after, err := r.removeNamespaceLabel(ctx, obj)
		return ctrl.Result{RequeueAfter: after}, err
	}
	_, err = r.ensureNamespaceLabel(ctx, ns, true)
	// Back when the namespace's first Lock expires: the last one to go
	// takes the label with it.
	next, _ := r.locks.NextExpiryIn(ns, r.now())
	return ctrl.Result{RequeueAfter: next}, err
}

// removeNamespaceLabel takes HasLocksLabel and HasLocksPendingAnnotation
// off obj, a namespace read before its Locks were found to hold no live
// one in the cache, and returns how soon to look at it again. A Lock
// admitted but not cached yet keeps the label: while a create in it is
// pending (Options.Pending; a create refused after admission leaves its
// marker until the marker's TTL), or, without the peer protocol that
// tells of pending creates, for ProtectedPendingGrace after a create's
// mark. The removal is made at obj's resourceVersion (guardedRemoval): a
// create admitted after the read writes a new mark, so the API server
// refuses the removal rather than have it undo the create's label, and
// the namespace is looked at again within conflictRecheck; a create
// announced before the read is pending at the check below, which follows
// the read (a create announces, then marks: webhook/create.go).
func (r *reconciler) removeNamespaceLabel(ctx context.Context, obj *metav1.PartialObjectMetadata) (time.Duration, error) {
	ns := obj.Name
	if _, has := obj.Labels[lockv1alpha1.HasLocksLabel]; obj.DeletionTimestamp != nil || !has {
		return 0, nil
	}
	if r.pending != nil && r.pending.PendingIn(ns) {
		ctrl.LoggerFrom(ctx).V(1).Info("Keeping the namespace label: a Lock create is pending", "namespace", ns)
		return pendingRecheck, nil
	}
	if left := lockv1alpha1.PendingLeft(obj.Annotations[lockv1alpha1.HasLocksPendingAnnotation], lockv1alpha1.ProtectedPendingGrace, r.now()); r.pending == nil && left > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Keeping the namespace label: a Lock create marked it", "namespace", ns, "for", left)
		return left, nil
	}
	err := r.client.Patch(ctx, obj, guardedRemoval(obj.ResourceVersion, map[string]any{
		"labels":      map[string]any{lockv1alpha1.HasLocksLabel: nil},
		"annotations": map[string]any{lockv1alpha1.HasLocksPendingAnnotation: nil}}))
	switch {
	case apierrors.IsConflict(err):
		return conflictRecheck, nil // written since the read: judged again
	case err != nil:
		return 0, client.IgnoreNotFound(fmt.Errorf("removing the %s label of namespace %s: %w", lockv1alpha1.HasLocksLabel, ns, err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Removed the namespace label", "namespace", ns, "label", lockv1alpha1.HasLocksLabel)
	return 0, nil
}

// pendingRecheck is how often a namespace whose label is kept for a
// pending Lock create is checked again.
const pendingRecheck = 5 * time.Second

// ensureNamespaceLabel puts HasLocksLabel on namespace ns when want (its
// removal, want false, is removeNamespaceLabel's), and returns whether ns
// carries it afterwards. It reads the namespace from the cache
// (namespaceLabel) and writes only when the label differs. A namespace
// that is gone or terminating is left as it is.
func (r *reconciler) ensureNamespaceLabel(ctx context.Context, ns string, want bool) (labelled bool, err error) {
	has, terminating, found, err := r.namespaceLabel(ctx, ns)
	if err != nil || !found {
		return false, err
	}
	if terminating || has || !want {
		return has, nil
	}
	if err := r.client.Patch(ctx, NamespaceObject(ns), namespaceLabelPatch()); err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("patching the %s label of namespace %s: %w", lockv1alpha1.HasLocksLabel, ns, err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Updated the namespace label", "namespace", ns, "label", lockv1alpha1.HasLocksLabel, "set", want)
	return want, nil
}

// namespaceStore is the store of the cache's Namespace informer, which
// namespaceLabel reads without a copy: a client-go informer's, or
// lockguard's own (cachestore.Informer).
type namespaceStore interface {
	HasSynced() bool
	GetIndexer() toolscache.Indexer
}

// namespaceLabel reads from the cache whether namespace ns carries
// HasLocksLabel, is terminating, and is there at all: from the informer's
// store once it has synced, without a copy of the namespace (a pass over
// every target at start copied its namespace's labels and annotations
// each time), through the client otherwise.
func (r *reconciler) namespaceLabel(ctx context.Context, ns string) (has, terminating, found bool, err error) {
	if s := r.namespaces; s != nil && s.HasSynced() {
		stored, ok, err := s.GetIndexer().GetByKey(ns)
		if err != nil || !ok {
			return false, false, false, err
		}
		if o, isObject := stored.(metav1.Object); isObject {
			v, _ := readmodel.LabelsOf(o).Label(lockv1alpha1.HasLocksLabel)
			return v == "true", o.GetDeletionTimestamp() != nil, true, nil
		}
	}
	obj := NamespaceObject(ns)
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return false, false, false, client.IgnoreNotFound(err)
	}
	return obj.Labels[lockv1alpha1.HasLocksLabel] == "true", obj.DeletionTimestamp != nil, true, nil
}

// namespaceLabelPatch is the merge patch that puts HasLocksLabel on a
// namespace.
func namespaceLabelPatch() client.Patch {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{lockv1alpha1.HasLocksLabel: "true"}}})
	return client.RawPatch(types.MergePatchType, patch)
}

// namespaceSource is the watch of Namespaces (metadata only): a namespace
// created, deleted or whose HasLocksLabel changes reconciles its label,
// the targets of its live Locks and its live selector Locks (whose status
// waits for the label): namespaceEvents. The cache keeps other labels of
// a namespace only while a selector ClusterLock reads them
// (readmodel.ClusterLabelKeys): theirs changing is none of this watch's
// business.
func namespaceSource(mgr ctrl.Manager, locks *readmodel.LockIndex) source.TypedSource[item] {
	return kindSource(mgr.GetCache(), NamespaceObject(""), handler.TypedEventHandler[*metav1.PartialObjectMetadata, item](namespaceEvents{locks}), hasLocksLabelChanged)
}

// namespaceEvents is the handler of namespace events: each enqueues the
// namespace's pass, the targets of its live Locks and its live selector
// Locks (requests), paced (enqueue) for a create of the initial list.
// Issue 38: at start every namespace's create enqueued every Lock of the
// cluster again, at once, past the paced backlog (151,000 items at
// 100,000 Locks in 1,000 namespaces: unique's map of their handles was 28
// MB of the start's peak heap in run AG's live profile, and the priority
// queue's maps keep the size of such a burst).
type namespaceEvents struct{ locks *readmodel.LockIndex }

// requests returns the passes an event of namespace ns enqueues.
func (h namespaceEvents) requests(ns string) []request {
	reqs := []request{{Namespace: ns}}
	for _, target := range h.locks.LiveTargetsIn(ns) {
		reqs = append(reqs, request{Target: target})
	}
	selectorLocks, _ := h.locks.LiveSelectorLocksIn(ns)
	for i := range selectorLocks {
		reqs = append(reqs, request{Lock: client.ObjectKeyFromObject(&selectorLocks[i])})
	}
	return reqs
}

// Create enqueues requests, paced for the initial list's namespaces.
func (h namespaceEvents) Create(_ context.Context, e event.TypedCreateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	enqueue(q, e.IsInInitialList, h.requests(e.Object.Name)...)
}

// Update enqueues requests.
func (h namespaceEvents) Update(_ context.Context, e event.TypedUpdateEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	enqueue(q, false, h.requests(e.ObjectNew.Name)...)
}

// Delete enqueues requests.
func (h namespaceEvents) Delete(_ context.Context, e event.TypedDeleteEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	enqueue(q, false, h.requests(e.Object.Name)...)
}

// Generic enqueues requests.
func (h namespaceEvents) Generic(_ context.Context, e event.TypedGenericEvent[*metav1.PartialObjectMetadata], q workqueue.TypedRateLimitingInterface[item]) {
	enqueue(q, false, h.requests(e.Object.Name)...)
}

// hasLocksLabelChanged passes the creates, deletes and generic events of
// a namespace, and its updates that change HasLocksLabel.
var hasLocksLabelChanged = predicate.TypedFuncs[*metav1.PartialObjectMetadata]{
	UpdateFunc: func(e event.TypedUpdateEvent[*metav1.PartialObjectMetadata]) bool {
		was, had := e.ObjectOld.GetLabels()[lockv1alpha1.HasLocksLabel]
		is, has := e.ObjectNew.GetLabels()[lockv1alpha1.HasLocksLabel]
		return was != is || had != has
	},
}
