package controller

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TargetReconciler keeps LockedAnnotation on one target equal to the sorted,
// comma-separated names of the live Locks that target it, and absent when
// there are none. It patches only the target's metadata.
type TargetReconciler struct {
	client  client.Client
	locks   *LockIndex
	watches *targetWatches
}

// Reconcile brings the annotation of the target named by key in line with
// the live Locks.
func (r *TargetReconciler) Reconcile(ctx context.Context, key lockv1alpha1.TargetKey) (ctrl.Result, error) {
	mapping, err := r.watches.targetMapping(key.GroupKind())
	if meta.IsNoMatchError(err) {
		return ctrl.Result{}, nil // Not served, so there is nothing to annotate; the Lock reconciler polls.
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("resolving kind %s: %w", key.GroupKind(), err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return ctrl.Result{}, nil // Cluster-scoped: no Lock can target it.
	}
	if err := r.watches.ensure(mapping.GroupVersionKind); err != nil {
		return ctrl.Result{}, err
	}

	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(mapping.GroupVersionKind)
	name := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
	if err := r.client.Get(ctx, name, target); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	locks, err := r.locks.LiveLocks(key)
	if err != nil {
		return ctrl.Result{}, err
	}
	want := annotationValue(locks)
	got, has := target.Annotations[lockv1alpha1.LockedAnnotation]
	if (want == "" && !has) || (want != "" && has && got == want) {
		return ctrl.Result{}, nil
	}

	if err := r.client.Patch(ctx, target, annotationPatch(want)); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("patching the %s annotation of %s %s: %w", lockv1alpha1.LockedAnnotation, key.GroupKind(), name, err))
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Updated the lock annotation", "from", got, "to", want)
	return ctrl.Result{}, nil
}

// annotationPatch is a JSON merge patch that sets LockedAnnotation to value,
// or removes it when value is "", and touches nothing else. It is written
// out rather than computed from the cached object: the cache keeps only
// this annotation of a target, so a diff against it could not tell the
// target's other annotations apart from absent ones (removing the last
// cached key would patch "annotations": null and drop them all).
func annotationPatch(value string) client.Patch {
	var v any
	if value != "" {
		v = value
	}
	data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{lockv1alpha1.LockedAnnotation: v}}})
	return client.RawPatch(types.MergePatchType, data)
}
