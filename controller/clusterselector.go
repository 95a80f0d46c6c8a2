package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// Selector ClusterLocks in the reconciler (docs/contract.md rules 13 and
// 22, docs/clusterlock.md): each pass labels every object a live selector
// ClusterLock matches (readmodel.ClusterSelected, the reading its create's
// admission makes too), the sweep removes the label from those no
// ClusterLock covers any more, and the status says what it covers.
// The kinds live selector ClusterLocks name are watched (clusterWatches):
// an object created into a selector, or labelled into one, brings a pass
// at once, which labels it, so that its delete is refused about one pass
// after (the windows docs/clusterlock.md states). While a selector
// ClusterLock is live a pass also runs every clusterLockRecheck, the
// backstop. A pass writes nothing where every label is in place.

// clusterSelectorHint ends the message of an InvalidTarget selector
// ClusterLock.
const clusterSelectorHint = "; the selector cannot be changed: create a ClusterLock whose kinds are spelled as `kubectl api-resources` lists them, then delete this one"

// observeSelector is observe for the selector ClusterLock cl: it labels
// every object cl's selector matches when cl is live and the guard is on,
// and returns what cl's status should say, the keys of the objects that
// keep their label, and how soon to look again.
func (c *clusterLocks) observeSelector(ctx context.Context, cl *lockv1alpha1.ClusterLock, now time.Time) (observation, []lockv1alpha1.TargetKey, time.Duration, error) {
	s := cl.Spec.Selector
	if err := s.Validate(); err != nil {
		return observation{reason: lockv1alpha1.ReasonInvalidTarget, message: err.Error() + clusterSelectorHint}, nil, 0, nil
	}
	unserved, err := c.clusterSelectorKinds(cl)
	if err != nil {
		return observation{}, nil, 0, err
	}
	if cl.AsLock().ExpiredAt(now) {
		return expiredObservation(cl.AsLock()), nil, 0, nil
	}
	if !c.guard {
		return observation{reason: lockv1alpha1.ReasonGuardDisabled, message: clusterGuardOffMessage}, nil, 0, nil
	}
	objs, err := readmodel.ClusterSelected(ctx, c.api, c.mapper, s)
	if err != nil {
		return observation{}, nil, 0, fmt.Errorf("ClusterLock %s: %w", cl.Name, err)
	}
	var (
		keys      []lockv1alpha1.TargetKey
		protected protectedList
		forbidden []lockv1alpha1.TargetKey
	)
	for i := range objs {
		o := &objs[i]
		gvk := o.GroupVersionKind()
		key := lockv1alpha1.TargetKey{Group: gvk.Group, Kind: gvk.Kind, Name: o.Name}
		keys = append(keys, key)
		labelled, err := c.ensureLabel(ctx, o, key, cl.Name)
		switch {
		case err != nil:
			return observation{}, nil, 0, err
		case labelled:
			protected.add(lockv1alpha1.ProtectedResource{Kind: key.Kind, Name: key.Name})
		default:
			forbidden = append(forbidden, key)
		}
	}
	obs := observation{active: true, reason: lockv1alpha1.ReasonActive, protected: protected.status()}
	if len(forbidden) > 0 {
		msg := lockv1alpha1.LabelForbiddenMessage(forbidden[0].GroupKind(), forbidden[0].Name)
		if len(forbidden) > 1 {
			msg += fmt.Sprintf(" (and %d more objects this ClusterLock selects, which RBAC refuses lockguard to label too)", len(forbidden)-1)
		}
		obs = observation{reason: lockv1alpha1.ReasonLabelForbidden, message: msg, protected: obs.protected}
	}
	if unserved != "" {
		// Not active, whatever else holds; it still covers what it
		// matches of its other kinds (as a selector Lock: selectorkinds.go).
		obs = observation{reason: lockv1alpha1.ReasonInvalidTarget, message: unserved, protected: obs.protected, live: true}
	}
	return obs, keys, clusterLockRecheck, nil
}

// clusterSelectorKinds checks the kinds of the selector ClusterLock cl
// against the API server's: "" when each is served, as written, for
// cluster-scoped objects; otherwise the message of cl's InvalidTarget
// condition, naming each kind that is not and how to write it (did you
// mean ...?). It errs only when the kinds cannot be read.
func (c *clusterLocks) clusterSelectorKinds(cl *lockv1alpha1.ClusterLock) (string, error) {
	s := cl.Spec.Selector
	var problems []string
	for _, k := range s.Kinds {
		gk := lockv1alpha1.ClusterKind(k)
		mapping, err := c.mapper.RESTMapping(gk)
		switch {
		case meta.IsNoMatchError(err):
			msg := fmt.Sprintf("no kind %q is served for cluster-scoped objects", k)
			if served := c.clusterKindSpelledLike(k); served != "" {
				msg += fmt.Sprintf("; did you mean %s?", served)
			} else {
				msg += " (a ClusterLock's kinds are Namespace, PersistentVolume, CustomResourceDefinition, ClusterRole, StorageClass, or a cluster-scoped kind of " + lockv1alpha1.Group + ", spelled as served)"
			}
			problems = append(problems, msg)
		case err != nil:
			return "", fmt.Errorf("mapping kind %s of ClusterLock %s: %w", gk, cl.Name, err)
		case mapping.Scope.Name() == meta.RESTScopeNameNamespace:
			problems = append(problems, fmt.Sprintf("%s is a namespaced kind: protect its objects with a Lock in their namespace", gk))
		}
	}
	if len(problems) == 0 {
		return "", nil
	}
	msg := "selector.kinds: " + strings.Join(problems, "; ") + " (this ClusterLock is not active while one of its kinds is not served as written"
	if len(problems) < len(s.Kinds) {
		msg += ", though the objects of its other kinds that it matches stay protected: status.protected"
	}
	return msg + ")" + clusterSelectorHint, nil
}

// clusterKindSpelledLike returns the kind a ClusterLock can name that k
// is a misspelling of (another case, the plural, the resource or a short
// name: Namespaces, namespace, ns; for core.navique.com's kinds,
// readmodel.Kinds' spellings); "" when none.
func (c *clusterLocks) clusterKindSpelledLike(k string) string {
	for _, gk := range lockv1alpha1.ClusterLockableKinds {
		mapping, err := c.mapper.RESTMapping(gk)
		if err != nil {
			continue
		}
		names := []string{gk.Kind, mapping.Resource.Resource, gk.Kind + "s"}
		for _, n := range names {
			if strings.EqualFold(k, n) {
				return gk.Kind
			}
		}
	}
	if c.kinds != nil {
		var m *readmodel.MisspelledKindError
		if _, err := c.kinds.Lookup(k); errors.As(err, &m) {
			return m.Served
		}
	}
	return ""
}

// ensureLabel keeps ClusterLockedLabel on obj (key), which the live
// ClusterLock named clName covers: it patches the label on when it is
// missing, unless RBAC refused that at obj's resourceVersion before, and
// drops ClusterLockPendingAnnotation once the ClusterLock that marked it
// is in the cache (markDone; the label then goes with the last
// ClusterLock). It reports whether obj carries the label; false when RBAC
// refuses it (LabelForbidden). It writes nothing when the label is there
// and no mark is left.
func (c *clusterLocks) ensureLabel(ctx context.Context, obj *metav1.PartialObjectMetadata, key lockv1alpha1.TargetKey, clName string) (bool, error) {
	gk := key.GroupKind()
	if obj.GetLabels()[lockv1alpha1.ClusterLockedLabel] != "true" {
		if rv, ok := c.refused[key]; ok && rv == obj.GetResourceVersion() {
			return false, nil
		}
		err := c.client.Patch(ctx, obj, labelPatch())
		switch {
		case apierrors.IsForbidden(err):
			c.refuse(key, obj.GetResourceVersion())
			return false, nil
		case err != nil:
			return false, fmt.Errorf("labelling %s %s for ClusterLock %s: %w", gk, key.Name, clName, err)
		}
		delete(c.refused, key)
		return true, nil
	}
	if mark, ok := obj.GetAnnotations()[lockv1alpha1.ClusterLockPendingAnnotation]; ok && c.refused[key] != obj.GetResourceVersion() && c.markDone(mark) {
		// The create that marked it is in the cache: the mark's grace is
		// not needed, and the label goes with the last ClusterLock.
		// At obj's resourceVersion: a mark written since is a new
		// ClusterLock's create, whose grace must run (guardedRemoval).
		err := c.client.Patch(ctx, obj, guardedRemoval(obj.GetResourceVersion(), map[string]any{
			"annotations": map[string]any{lockv1alpha1.ClusterLockPendingAnnotation: nil}}))
		switch {
		case apierrors.IsConflict(err):
			// The next pass (the create's event brings one) drops it.
		case apierrors.IsForbidden(err):
			c.refuse(key, obj.GetResourceVersion()) // the grace runs out
		case client.IgnoreNotFound(err) != nil:
			return false, fmt.Errorf("removing %s from %s %s: %w", lockv1alpha1.ClusterLockPendingAnnotation, gk, key.Name, err)
		}
	}
	return true, nil
}

// markDone reports whether a pending mark has done its work
// (lockv1alpha1.PendingWait): the ClusterLock it names is in the cache
// at this pass, or its grace is over.
func (c *clusterLocks) markDone(mark string) bool {
	return lockv1alpha1.PendingWait(mark, lockv1alpha1.ClusterLockPendingGrace, c.now(), func(name string) bool { return c.cached[name] }) == 0
}
