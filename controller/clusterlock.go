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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// The ClusterLock reconciler (docs/contract.md rule 22, docs/clusterlock.md)
// keeps ClusterLockedLabel on the target of every live ClusterLock, and on
// every object a live selector ClusterLock matches (clusterselector.go),
// and removes it from objects no live ClusterLock covers, so that the chart's
// entries (objectSelector on the label) send lockguard the deletes of
// exactly the cluster-locked objects; and it writes each ClusterLock's
// status, with the Lock's status code (writeStatusOf). ClusterLocks are
// few: every pass takes all of them, and a sweep of the labelled objects
// of each kind a ClusterLock can name.

// +kubebuilder:rbac:groups=core.navique.com,resources=clusterlocks,verbs=get;list;watch
// +kubebuilder:rbac:groups=core.navique.com,resources=clusterlocks/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces;persistentvolumes,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=get;list;watch;patch

// lockguard holds no escalate on clusterroles (it would let whoever
// controls its ServiceAccount widen any ClusterRole): RBAC lets it label a
// ClusterRole only when it holds every permission the role grants. When it
// does not, the ClusterLock says LabelForbidden with the kubectl label
// command to run, and is Active once someone who may has run it.

// clusterLockKey is the one key of the ClusterLock controller's queue:
// every pass reconciles every ClusterLock.
var clusterLockKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "clusterlocks"}}

// clusterLockRecheck is how soon a pass runs again while a ClusterLock's
// target is missing or its kind unknown, or while a live selector
// ClusterLock may select objects created or labelled since: a target by
// name is not watched, and the watches of the kinds selectors name
// (clusterWatches) are not the only way in (a kind not synced yet, a
// label key the cache did not keep yet).
const clusterLockRecheck = 10 * time.Second

// clusterLocks reconciles ClusterLocks.
type clusterLocks struct {
	status *reconciler // writes the status (writeStatusOf)
	client client.Client
	api    client.Reader // the targets, read from the API server
	mapper meta.RESTMapper
	kinds  *readmodel.Kinds
	// guard: lockguard's chart renders the ClusterLock webhook entries
	// (Options.DisableClusterLockGuard false).
	guard bool
	now   func() time.Time
	// interval is how old discovery's kinds may be (Options.DiscoveryInterval).
	interval time.Duration
	// refused holds, for each object whose label write RBAC refused, its
	// resourceVersion then: the write is not tried again until the object
	// changes, so that a steady cluster gets no writes, and a stale label
	// left is logged once.
	refused map[lockv1alpha1.TargetKey]string
	// cached are the names of the ClusterLocks in the cache at this pass:
	// a pending mark is dropped once the ClusterLock it names is one.
	cached map[string]bool
	// watches are the watches of the kinds live selector ClusterLocks
	// name (clusterwatch.go); nil: none (a pass every clusterLockRecheck).
	watches *clusterWatches
}

// setupClusterLocks adds, on the leader, the ClusterLock controller to mgr
// once the ClusterLock CRD is served: an installation upgraded without
// its CRD (helm installs crds/ only on the first install) runs without it
// until the CRD is applied.
func setupClusterLocks(mgr ctrl.Manager, r *reconciler, kinds *readmodel.Kinds, opts Options) error {
	c := &clusterLocks{status: r, client: mgr.GetClient(), api: mgr.GetAPIReader(), mapper: mgr.GetRESTMapper(), kinds: kinds,
		guard: !opts.DisableClusterLockGuard, now: r.now, interval: opts.DiscoveryInterval}
	return mgr.Add(leaderRunnable(func(ctx context.Context) error {
		gk := lockv1alpha1.GroupVersion.WithKind("ClusterLock").GroupKind()
		logged := false
		err := wait.PollUntilContextCancel(ctx, opts.DiscoveryInterval, true, func(context.Context) (bool, error) {
			_, err := mgr.GetRESTMapper().RESTMapping(gk)
			if err != nil && !logged {
				mgr.GetLogger().Info("The ClusterLock CRD is not served; ClusterLocks are reconciled once it is (kubectl apply --server-side -f the chart's crds/)", "error", err.Error())
				logged = true
			}
			return err == nil, nil
		})
		if err != nil {
			return nil // stopped before the CRD was served
		}
		enqueue := handler.TypedEnqueueRequestsFromMapFunc(func(context.Context, *lockv1alpha1.ClusterLock) []reconcile.Request {
			return []reconcile.Request{clusterLockKey}
		})
		// One pass at the start whatever the ClusterLocks, so that a label
		// left by a ClusterLock deleted while no leader ran is swept even
		// when no ClusterLock is left to bring a pass.
		start := make(chan event.TypedGenericEvent[*lockv1alpha1.ClusterLock], 1)
		start <- event.TypedGenericEvent[*lockv1alpha1.ClusterLock]{Object: &lockv1alpha1.ClusterLock{}}
		// Not the builder: the watches need the controller, and a pass
		// must not start before they are in place.
		ctlOpts := controller.Options{Reconciler: c, Logger: mgr.GetLogger()}
		ctlOpts.DefaultFromConfig(mgr.GetControllerOptions())
		ctl, err := controller.NewUnmanaged("clusterlock", ctlOpts)
		if err != nil {
			return fmt.Errorf("building the ClusterLock controller: %w", err)
		}
		for _, src := range []source.Source{source.Kind(mgr.GetCache(), &lockv1alpha1.ClusterLock{}, enqueue), source.Channel(start, enqueue)} {
			if err := ctl.Watch(src); err != nil {
				return fmt.Errorf("watching ClusterLocks: %w", err)
			}
		}
		c.watches = newClusterWatches(mgr.GetCache(), ctl, mgr.GetRESTMapper(), opts.ClusterLabelKeys)
		return mgr.Add(ctl)
	}))
}

// leaderRunnable is a function run once on the elected leader.
type leaderRunnable func(ctx context.Context) error

func (f leaderRunnable) Start(ctx context.Context) error { return f(ctx) }

// NeedLeaderElection reports that it runs on the leader only.
func (f leaderRunnable) NeedLeaderElection() bool { return true }

// Reconcile labels the targets of the live ClusterLocks and the objects
// their selectors match, removes the label from every other object that
// carries it, and writes each ClusterLock's status.
func (c *clusterLocks) Reconcile(ctx context.Context, _ reconcile.Request) (ctrl.Result, error) {
	var list lockv1alpha1.ClusterLockList
	if err := c.client.List(ctx, &list); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing ClusterLocks: %w", err)
	}
	now := c.now()
	unsynced := c.track(ctx, list.Items, now)
	c.cached = make(map[string]bool, len(list.Items))
	for i := range list.Items {
		c.cached[list.Items[i].Name] = true
	}
	keep, frozen := map[lockv1alpha1.TargetKey]bool{}, map[lockv1alpha1.TargetKey]bool{}
	var after time.Duration
	later := func(d time.Duration) { after = soonerOf(after, d) }
	if unsynced {
		later(unsyncedRetry)
	}
	var errs []error
	unknown := false // a live ClusterLock whose objects could not be read
	for i := range list.Items {
		cl := &list.Items[i]
		if cl.DeletionTimestamp != nil {
			continue // it protects nothing (Live), and its status goes with it
		}
		var (
			obs     observation
			keys    []lockv1alpha1.TargetKey
			recheck time.Duration
			err     error
		)
		if cl.HasSelector() {
			obs, keys, recheck, err = c.observeSelector(ctx, cl, now)
		} else {
			var key *lockv1alpha1.TargetKey
			if obs, key, recheck, err = c.observe(ctx, cl, now); key != nil {
				keys = append(keys, *key)
			}
		}
		if err != nil {
			errs = append(errs, err)
			unknown = true
			continue
		}
		for _, k := range keys {
			keep[k] = true
		}
		if obs, err = c.freezeAll(ctx, cl, keys, obs, now, frozen); err != nil { // clusterreadonly.go
			errs = append(errs, err)
			unknown = true
		}
		later(recheck)
		if d, ok := cl.AsLock().ExpiresIn(now); ok {
			later(d + time.Second/10)
		}
		view := cl.AsLock()
		errs = append(errs, c.status.writeStatusOf(ctx, cl, view, obs))
	}
	if unknown {
		// What a ClusterLock covers could not be read: keep lacks it, and
		// a sweep would take the label off objects it protects (their
		// deletes would no longer reach lockguard). The error retries.
		return ctrl.Result{RequeueAfter: after}, errors.Join(errs...)
	}
	pending, err := c.sweep(ctx, list.Items, keep, now)
	later(pending)
	errs = append(errs, err)
	pending, err = c.sweepReadOnly(ctx, c.sweptKinds(list.Items), frozen, now)
	later(pending)
	errs = append(errs, err)
	return ctrl.Result{RequeueAfter: after}, errors.Join(errs...)
}

// observe checks cl's target and, when cl is live and the guard is on,
// labels it: it returns what cl's status should say, the key of the
// object that keeps its label (nil: none), and how soon to look again.
func (c *clusterLocks) observe(ctx context.Context, cl *lockv1alpha1.ClusterLock, now time.Time) (observation, *lockv1alpha1.TargetKey, time.Duration, error) {
	key, err := cl.Target()
	if err != nil {
		return observation{reason: lockv1alpha1.ReasonInvalidTarget, message: err.Error() + invalidHint}, nil, 0, nil
	}
	gk := key.GroupKind()
	mapping, err := c.mapper.RESTMapping(gk)
	switch {
	case meta.IsNoMatchError(err):
		return observation{reason: lockv1alpha1.ReasonInvalidTarget, message: fmt.Sprintf(
			"no kind %s is served by the API server (kinds are spelled as served, e.g. Namespace or CustomResourceDefinition)%s", gk, invalidHint)}, nil, clusterLockRecheck, nil
	case err != nil:
		return observation{}, nil, 0, fmt.Errorf("mapping kind %s of ClusterLock %s: %w", gk, cl.Name, err)
	case mapping.Scope.Name() == meta.RESTScopeNameNamespace:
		return observation{reason: lockv1alpha1.ReasonInvalidTarget, message: fmt.Sprintf(
			"%s is a namespaced kind: protect its objects with a Lock in their namespace%s", gk, invalidHint)}, nil, 0, nil
	}
	if cl.AsLock().ExpiredAt(now) {
		return expiredObservation(cl.AsLock()), nil, 0, nil
	}
	if !c.guard {
		return observation{reason: lockv1alpha1.ReasonGuardDisabled, message: clusterGuardOffMessage}, nil, 0, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.api.Get(ctx, client.ObjectKey{Name: key.Name}, obj); apierrors.IsNotFound(err) {
		return observation{reason: lockv1alpha1.ReasonMissingReference, message: fmt.Sprintf(
			"%s %q not found; it is labelled and its deletion denied within %s of its creation", key.Kind, key.Name, clusterLockRecheck)}, &key, clusterLockRecheck, nil
	} else if err != nil {
		return observation{}, nil, 0, fmt.Errorf("reading %s %s: %w", gk, key.Name, err)
	}
	if labelled, err := c.ensureLabel(ctx, obj, key, cl.Name); err != nil {
		return observation{}, nil, 0, err
	} else if !labelled {
		// Looked at again every clusterLockRecheck: the label someone
		// puts on makes the ClusterLock Active.
		return observation{reason: lockv1alpha1.ReasonLabelForbidden, message: lockv1alpha1.LabelForbiddenMessage(gk, key.Name)}, &key, clusterLockRecheck, nil
	}
	return observation{active: true, reason: lockv1alpha1.ReasonActive, protected: &lockv1alpha1.ProtectedStatus{Count: 1,
		Resources: []lockv1alpha1.ProtectedResource{{Kind: key.Kind, Name: key.Name}}}}, &key, 0, nil
}

// invalidHint ends the message of an InvalidTarget ClusterLock.
const invalidHint = "; targetRef cannot be changed: create a ClusterLock with the right target, then delete this one"

// clusterGuardOffMessage is the Ready message of a ClusterLock while
// lockguard runs without its ClusterLock guard.
const clusterGuardOffMessage = "lockguard runs without its ClusterLock guard (the chart's guards.clusterLock.enabled=false, or mode policy: --cluster-lock-guard=false): no webhook entry refuses the deletion of this ClusterLock's target"

// sweep removes ClusterLockedLabel from the objects that carry it and are
// not in keep: of every kind a ClusterLock can name outside the group,
// and of the group's cluster-scoped kinds that discovery serves or a
// ClusterLock names. An object whose label a ClusterLock's create put on
// less than ClusterLockPendingGrace ago (ClusterLockPendingAnnotation)
// keeps it: that ClusterLock may not be in the cache yet. It returns how
// soon the first such grace ends.
func (c *clusterLocks) sweep(ctx context.Context, locks []lockv1alpha1.ClusterLock, keep map[lockv1alpha1.TargetKey]bool, now time.Time) (time.Duration, error) {
	var pending time.Duration
	var errs []error
	for _, gk := range c.sweptKinds(locks) {
		mapping, err := c.mapper.RESTMapping(gk)
		if err != nil || mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			continue // not served, so nothing carries the label
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
		if err := c.api.List(ctx, list, client.HasLabels{lockv1alpha1.ClusterLockedLabel}); err != nil {
			errs = append(errs, fmt.Errorf("listing the %s labelled %s: %w", gk, lockv1alpha1.ClusterLockedLabel, err))
			continue
		}
		for i := range list.Items {
			o := &list.Items[i]
			key := lockv1alpha1.TargetKey{Group: gk.Group, Kind: gk.Kind, Name: o.Name}
			if keep[key] {
				continue
			}
			if left := lockv1alpha1.PendingLeft(o.Annotations[lockv1alpha1.ClusterLockPendingAnnotation], lockv1alpha1.ClusterLockPendingGrace, now); left > 0 {
				pending = soonerOf(pending, left)
				continue
			}
			if rv, ok := c.refused[key]; ok && rv == o.ResourceVersion {
				continue // refused before, and logged then
			}
			o.SetGroupVersionKind(mapping.GroupVersionKind)
			err := c.client.Patch(ctx, o, unlabelPatch(o.ResourceVersion))
			switch {
			case apierrors.IsConflict(err):
				// Written since the list: a ClusterLock's create may have
				// labelled and marked it. The next pass judges it again.
				pending = soonerOf(pending, conflictRecheck)
			case apierrors.IsForbidden(err):
				// A stale label is harmless: the delete it brings to
				// lockguard is allowed once the API server has no
				// ClusterLock naming the object.
				c.refuse(key, o.ResourceVersion)
				log.FromContext(ctx).Info("RBAC refuses lockguard removing a stale label; it is left (deletes are allowed)",
					"kind", gk.String(), "name", o.Name, "label", lockv1alpha1.ClusterLockedLabel,
					"command", fmt.Sprintf("%s-", strings.TrimSuffix(lockv1alpha1.LabelCommand(gk, o.Name), "=true")), "error", err.Error())
			case client.IgnoreNotFound(err) != nil:
				errs = append(errs, fmt.Errorf("removing %s from %s %s: %w", lockv1alpha1.ClusterLockedLabel, gk, o.Name, err))
			default:
				delete(c.refused, key)
			}
		}
	}
	return pending, errors.Join(errs...)
}

// refuse records that RBAC refused writing the label of key at
// resourceVersion rv.
func (c *clusterLocks) refuse(key lockv1alpha1.TargetKey, rv string) {
	if c.refused == nil {
		c.refused = map[lockv1alpha1.TargetKey]string{}
	}
	c.refused[key] = rv
}

// labelPatch is a merge patch that puts ClusterLockedLabel=true on.
func labelPatch() client.Patch {
	return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:"true"}}}`, lockv1alpha1.ClusterLockedLabel))
}

// unlabelPatch is a merge patch that removes ClusterLockedLabel and
// ClusterLockPendingAnnotation from an object still at resourceVersion
// rv (the API server refuses it, Conflict, once the object has changed).
func unlabelPatch(rv string) client.Patch {
	return guardedRemoval(rv, map[string]any{"labels": map[string]any{lockv1alpha1.ClusterLockedLabel: nil},
		"annotations": map[string]any{lockv1alpha1.ClusterLockPendingAnnotation: nil}})
}
