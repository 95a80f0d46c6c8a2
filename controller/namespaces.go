package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// namespaceObject returns the metadata-only Namespace ns.
func namespaceObject(ns string) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	obj.SetName(ns)
	return obj
}

// reconcileNamespace puts HasLocksLabel on namespace ns, or removes it,
// as its live Locks say, and returns whether ns carries it afterwards. A
// namespace that is gone or terminating is left as it is.
//
// It looks through the Locks of ns, so it runs on namespace events only; a
// target's pass, which already holds live Locks of ns, calls
// ensureNamespaceLabel with want true instead. Calling this per target
// made a start with n Locks in one namespace cost n² (100,000 Locks: still
// busy after 5 minutes, make bench at c16041e).
//
// While a Lock create in ns is pending (Options.Pending), a label is not
// removed: the replica that admitted the create put it on before allowing
// it, and the Lock reaches the cache a moment later. ns is then checked
// again after pendingRecheck (a create refused after admission leaves its
// marker until the marker's TTL).
func (r *reconciler) reconcileNamespace(ctx context.Context, ns string) (ctrl.Result, error) {
	if !r.locks.HasSynced() {
		return ctrl.Result{}, readmodel.ErrNotSynced
	}
	want, err := r.locks.HasLiveLocksIn(ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !want && r.pending != nil && r.pending.PendingIn(ns) {
		ctrl.LoggerFrom(ctx).V(1).Info("Keeping the namespace label: a Lock create is pending", "namespace", ns)
		return ctrl.Result{RequeueAfter: pendingRecheck}, nil
	}
	_, err = r.ensureNamespaceLabel(ctx, ns, want)
	// Back when the namespace's first Lock expires: the last one to go
	// takes the label with it.
	next, _ := r.locks.NextExpiryIn(ns, r.now())
	return ctrl.Result{RequeueAfter: next}, err
}

// pendingRecheck is how often a namespace whose label is kept for a
// pending Lock create is checked again.
const pendingRecheck = 5 * time.Second

// ensureNamespaceLabel puts HasLocksLabel on namespace ns when want, or
// removes it, and returns whether ns carries it afterwards. It reads the
// namespace from the cache and writes only when the label differs. A
// namespace that is gone or terminating is left as it is.
func (r *reconciler) ensureNamespaceLabel(ctx context.Context, ns string, want bool) (labelled bool, err error) {
	obj := namespaceObject(ns)
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	has := obj.Labels[lockv1alpha1.HasLocksLabel] == "true"
	if obj.DeletionTimestamp != nil || has == want {
		return has, nil
	}
	if err := r.client.Patch(ctx, obj, namespaceLabelPatch(want)); err != nil {
		return false, client.IgnoreNotFound(fmt.Errorf("patching the %s label of namespace %s: %w", lockv1alpha1.HasLocksLabel, ns, err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Updated the namespace label", "namespace", ns, "label", lockv1alpha1.HasLocksLabel, "set", want)
	return want, nil
}

// namespaceLabelPatch is the merge patch that puts HasLocksLabel on a
// namespace (want) or removes it.
func namespaceLabelPatch(want bool) client.Patch {
	var value any // nil removes the label
	if want {
		value = "true"
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{lockv1alpha1.HasLocksLabel: value}}})
	return client.RawPatch(types.MergePatchType, patch)
}

// namespaceSource is the watch of Namespaces (metadata only): a namespace
// created, deleted or whose labels change reconciles its label, the
// targets of its live Locks and its live selector Locks (whose status
// waits for the label).
func namespaceSource(mgr ctrl.Manager, locks *readmodel.LockIndex) source.TypedSource[request] {
	return kindSource(mgr.GetCache(), namespaceObject(""),
		handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o *metav1.PartialObjectMetadata) []request {
			reqs := []request{{Namespace: o.Name}}
			for _, target := range locks.LiveTargetsIn(o.Name) {
				reqs = append(reqs, request{Target: target})
			}
			selectorLocks, _ := locks.LiveSelectorLocksIn(o.Name)
			for i := range selectorLocks {
				reqs = append(reqs, request{Lock: client.ObjectKeyFromObject(&selectorLocks[i])})
			}
			return reqs
		}),
		predicate.TypedLabelChangedPredicate[*metav1.PartialObjectMetadata]{})
}
