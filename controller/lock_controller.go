package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Polling intervals of the Lock reconciler, for what no watch reports.
const (
	// unservedKindRecheck is how often a Lock whose target kind is not
	// served checks again, so that a CRD installed later is picked up.
	unservedKindRecheck = 10 * time.Second
	// annotationRecheck is how long a Lock whose target exists but is not
	// annotated yet waits before looking again (the annotation's update
	// event normally comes first).
	annotationRecheck = 5 * time.Second
)

// LockReconciler writes a Lock's status: active when its target exists and
// carries the lock annotation naming it; otherwise Ready=False with reason
// MissingReference or InvalidTarget.
type LockReconciler struct {
	client  client.Client
	watches *targetWatches
	events  events.EventRecorder
}

// observation is what a Lock's status should say.
type observation struct {
	active  bool
	reason  string
	message string
}

// Reconcile computes the Lock's status from its target and writes it when
// it changed.
func (r *LockReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var lock lockv1alpha1.Lock
	if err := r.client.Get(ctx, req.NamespacedName, &lock); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if lock.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // Going away: it no longer protects, and its status no longer matters.
	}
	obs, requeue, err := r.observe(ctx, &lock)
	if err != nil || obs == nil {
		return ctrl.Result{RequeueAfter: requeue}, err
	}
	if err := r.writeStatus(ctx, &lock, *obs); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// observe looks at the Lock's target. A nil observation means "no change
// yet": the target exists but the target reconciler has not annotated it.
func (r *LockReconciler) observe(ctx context.Context, lock *lockv1alpha1.Lock) (*observation, time.Duration, error) {
	ref := lock.Spec.TargetRef
	key, err := lock.Target()
	if err != nil {
		return &observation{reason: lockv1alpha1.ReasonInvalidTarget, message: err.Error()}, 0, nil
	}
	gk := key.GroupKind()
	mapping, err := r.watches.targetMapping(gk)
	if meta.IsNoMatchError(err) {
		return &observation{
			reason:  lockv1alpha1.ReasonMissingReference,
			message: fmt.Sprintf("no kind %s is served by the API server; the Lock becomes active when the kind is installed and %s %q exists", gk, ref.Kind, ref.Name),
		}, unservedKindRecheck, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("resolving the target kind %s of Lock %s: %w", gk, client.ObjectKeyFromObject(lock), err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return &observation{
			reason:  lockv1alpha1.ReasonInvalidTarget,
			message: fmt.Sprintf("%s is cluster-scoped; a Lock protects resources in its own namespace", gk),
		}, 0, nil
	}
	if err := r.watches.ensure(mapping.GroupVersionKind); err != nil {
		return nil, 0, err
	}

	target := &metav1.PartialObjectMetadata{}
	target.SetGroupVersionKind(mapping.GroupVersionKind)
	err = r.client.Get(ctx, types.NamespacedName{Namespace: lock.Namespace, Name: ref.Name}, target)
	if apierrors.IsNotFound(err) {
		return &observation{
			reason:  lockv1alpha1.ReasonMissingReference,
			message: fmt.Sprintf("%s %q not found in namespace %q; its deletion will be denied as soon as it is created", ref.Kind, ref.Name, lock.Namespace),
		}, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("getting the target %s %s/%s of Lock %s: %w", gk, lock.Namespace, ref.Name, lock.Name, err)
	}
	if !annotationLists(target.Annotations[lockv1alpha1.LockedAnnotation], lock.Name) {
		return nil, annotationRecheck, nil
	}
	msg := fmt.Sprintf("deleting %s %q is denied while this Lock exists", ref.Kind, ref.Name)
	if lock.Spec.Reason != "" {
		msg += ": " + lock.Spec.Reason
	}
	return &observation{active: true, reason: lockv1alpha1.ReasonActive, message: msg}, 0, nil
}

// writeStatus patches the Lock's status to obs, if it differs.
func (r *LockReconciler) writeStatus(ctx context.Context, lock *lockv1alpha1.Lock, obs observation) error {
	orig := lock.DeepCopy()
	status := metav1.ConditionFalse
	if obs.active {
		status = metav1.ConditionTrue
	}
	lock.Status.Active = obs.active
	lock.Status.ObservedGeneration = lock.Generation
	meta.SetStatusCondition(&lock.Status.Conditions, metav1.Condition{
		Type:               lockv1alpha1.ConditionReady,
		Status:             status,
		Reason:             obs.reason,
		Message:            obs.message,
		ObservedGeneration: lock.Generation,
	})
	if equality.Semantic.DeepEqual(orig.Status, lock.Status) {
		return nil
	}
	if err := r.client.Status().Patch(ctx, lock, client.MergeFrom(orig)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the status of Lock %s: %w", client.ObjectKeyFromObject(lock), err))
	}
	if before := meta.FindStatusCondition(orig.Status.Conditions, lockv1alpha1.ConditionReady); r.events != nil && (before == nil || before.Reason != obs.reason) {
		eventType := corev1.EventTypeWarning
		if obs.active {
			eventType = corev1.EventTypeNormal
		}
		r.events.Eventf(lock, nil, eventType, obs.reason, "Reconcile", "%s", obs.message)
	}
	return nil
}
