package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ReadOnly ClusterLocks (docs/contract.md rules 16 and 22): the reconciler
// keeps ReadOnlyLabel on the target of every live ReadOnly ClusterLock
// (lockv1alpha1.ClusterLock.ReadOnlyAt) that carries ClusterLockedLabel,
// and removes it from every cluster-scoped object of the kinds a
// ClusterLock can name that no such ClusterLock names, writing only on a
// change; the ClusterLock's ReadOnly condition says whether the target
// carries it (InForce), as a ReadOnly Lock's does. A label that a
// ClusterLock's create put on with its pending mark
// (ClusterLockPendingAnnotation) is kept for ClusterLockPendingGrace, as
// ClusterLockedLabel is.

// freeze completes obs, the observation of cl whose target is key (nil:
// none), for cl's ReadOnly condition: when cl is ReadOnly at now and its
// target is labelled ClusterLockedLabel (obs active, or Audit's view of
// it), it puts ReadOnlyLabel on the target if missing, and adds key to
// frozen. A target that RBAC lets lockguard label with neither label
// (LabelForbidden) stays Pending, the message saying what to run.
func (c *clusterLocks) freeze(ctx context.Context, cl *lockv1alpha1.ClusterLock, key *lockv1alpha1.TargetKey, obs observation, now time.Time, frozen map[lockv1alpha1.TargetKey]bool) (observation, error) {
	switch {
	case !cl.ReadOnlyAt(now):
		return obs, nil
	case !c.guard:
		return obs.freezing(readOnlyObservation{guardOff: true}), nil
	case key == nil:
		return obs, nil
	case obs.reason == lockv1alpha1.ReasonLabelForbidden:
		frozen[*key] = true // whoever may label it can put both on
		return obs.freezing(readOnlyObservation{message: fmt.Sprintf("the target does not carry the labels %s=true and %s=true, which lockguard may not put on (see the Ready condition); its updates are not refused until someone who may puts both on",
			lockv1alpha1.ClusterLockedLabel, lockv1alpha1.ReadOnlyLabel)}), nil
	case !obs.active:
		return obs, nil // missing (the condition says InForce: nothing to freeze yet)
	}
	frozen[*key] = true
	mapping, err := c.mapper.RESTMapping(key.GroupKind())
	if err != nil {
		return obs, fmt.Errorf("mapping kind %s of ClusterLock %s: %w", key.GroupKind(), cl.Name, err)
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.api.Get(ctx, client.ObjectKey{Name: key.Name}, obj); err != nil {
		return obs, client.IgnoreNotFound(fmt.Errorf("reading %s %s: %w", key.GroupKind(), key.Name, err))
	}
	if obj.GetLabels()[lockv1alpha1.ReadOnlyLabel] == "true" {
		return obs.freezing(readOnlyObservation{frozen: true}), nil
	}
	err = c.client.Patch(ctx, obj, readOnlyLabelPatch())
	switch {
	case apierrors.IsForbidden(err):
		return obs.freezing(readOnlyObservation{message: fmt.Sprintf("lockguard may not label %s %s %s=true: run `%s` as someone who may; its updates are not refused until it is labelled",
			key.Kind, key.Name, lockv1alpha1.ReadOnlyLabel, readOnlyLabelCommand(key.GroupKind(), key.Name))}), nil
	case err != nil:
		return obs, client.IgnoreNotFound(fmt.Errorf("labelling %s %s %s for ClusterLock %s: %w", key.GroupKind(), key.Name, lockv1alpha1.ReadOnlyLabel, cl.Name, err))
	}
	return obs.freezing(readOnlyObservation{frozen: true}), nil
}

// freezeAll is freeze for each of keys, the objects cl covers (its target,
// or what its selector matches): frozen in the observation only when each
// of them is, the message of the first that is not otherwise. A selector
// ClusterLock that matches nothing has nothing to freeze (InForce, as a
// selector Lock's).
func (c *clusterLocks) freezeAll(ctx context.Context, cl *lockv1alpha1.ClusterLock, keys []lockv1alpha1.TargetKey, obs observation, now time.Time, frozen map[lockv1alpha1.TargetKey]bool) (observation, error) {
	if len(keys) == 0 {
		out, err := c.freeze(ctx, cl, nil, obs, now, frozen)
		if err == nil && cl.HasSelector() && cl.ReadOnlyAt(now) && c.guard && obs.active {
			out = out.freezing(readOnlyObservation{frozen: true})
		}
		return out, err
	}
	var (
		out  observation
		errs []error
	)
	for i := range keys {
		o, err := c.freeze(ctx, cl, &keys[i], obs, now, frozen)
		errs = append(errs, err)
		if i == 0 || (out.readOnly.frozen && !o.readOnly.frozen) {
			out = o
		}
	}
	return out, errors.Join(errs...)
}

// sweepReadOnly removes ReadOnlyLabel from the cluster-scoped objects of
// kinds that carry it and are not in frozen, but for those whose label a
// ClusterLock's create put on less than ClusterLockPendingGrace ago. It
// returns how soon the first such grace ends. Locks never label
// cluster-scoped objects, so every such label is a ClusterLock's.
func (c *clusterLocks) sweepReadOnly(ctx context.Context, kinds []schema.GroupKind, frozen map[lockv1alpha1.TargetKey]bool, now time.Time) (time.Duration, error) {
	var pending time.Duration
	var errs []error
	for _, gk := range kinds {
		mapping, err := c.mapper.RESTMapping(gk)
		if err != nil || mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
		if err := c.api.List(ctx, list, client.HasLabels{lockv1alpha1.ReadOnlyLabel}); err != nil {
			errs = append(errs, fmt.Errorf("listing the %s labelled %s: %w", gk, lockv1alpha1.ReadOnlyLabel, err))
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			if frozen[lockv1alpha1.TargetKey{Group: gk.Group, Kind: gk.Kind, Name: o.Name}] {
				continue
			}
			if left := lockv1alpha1.PendingLeft(o.Annotations[lockv1alpha1.ClusterLockPendingAnnotation], lockv1alpha1.ClusterLockPendingGrace, now); left > 0 {
				pending = soonerOf(pending, left)
				continue
			}
			o.SetGroupVersionKind(mapping.GroupVersionKind)
			// Forbidden (a ClusterRole lockguard may not update) is left:
			// the update it brings to lockguard is allowed, no ReadOnly
			// ClusterLock naming the object.
			switch err := c.client.Patch(ctx, o, guardedRemoval(o.ResourceVersion, map[string]any{
				"labels": map[string]any{lockv1alpha1.ReadOnlyLabel: nil}})); {
			case apierrors.IsConflict(err):
				// Written since the list (a ReadOnly ClusterLock's create
				// may have marked it): the next pass judges it again.
				pending = soonerOf(pending, conflictRecheck)
			case client.IgnoreNotFound(err) != nil && !apierrors.IsForbidden(err):
				errs = append(errs, fmt.Errorf("removing %s from %s %s: %w", lockv1alpha1.ReadOnlyLabel, gk, o.Name, err))
			}
		}
	}
	return pending, errors.Join(errs...)
}

// sweptKinds are the kinds whose labelled objects a pass sweeps: every
// kind a ClusterLock can name outside the group, the group's
// cluster-scoped kinds that discovery served within c.interval or one of
// locks names, and the kinds a selector of locks names that a ClusterLock
// can protect.
func (c *clusterLocks) sweptKinds(locks []lockv1alpha1.ClusterLock) []schema.GroupKind {
	kinds := slices.Clone(lockv1alpha1.ClusterLockableKinds)
	add := func(gk schema.GroupKind) {
		if !slices.Contains(kinds, gk) {
			kinds = append(kinds, gk)
		}
	}
	for i := range locks {
		if key, err := locks[i].Target(); err == nil && key.Group == lockv1alpha1.Group {
			add(key.GroupKind())
		}
		if sel := locks[i].Spec.Selector; sel != nil {
			for _, gk := range sel.GroupKinds() {
				if lockv1alpha1.ClusterProtectable(gk) == nil {
					add(gk)
				}
			}
		}
	}
	if c.kinds != nil {
		if served, err := c.kinds.Recent(c.interval); err == nil {
			for _, k := range served {
				if !k.Namespaced {
					add(k.GVK.GroupKind())
				}
			}
		}
	}
	return kinds
}

// readOnlyLabelPatch is a merge patch that puts ReadOnlyLabel=true on
// (its removal is a guardedRemoval).
func readOnlyLabelPatch() client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, lockv1alpha1.ReadOnlyLabel))
}

// readOnlyLabelCommand is the kubectl command that puts ReadOnlyLabel on
// the object of gk named name.
func readOnlyLabelCommand(gk schema.GroupKind, name string) string {
	cmd := lockv1alpha1.LabelCommand(gk, name)
	return cmd[:len(cmd)-len(lockv1alpha1.ClusterLockedLabel+"=true")] + lockv1alpha1.ReadOnlyLabel + "=true"
}
