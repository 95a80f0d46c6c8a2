package lockctl

import (
	"context"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// kubectl lock why for ReadOnly ClusterLocks (docs/contract.md rules 16
// and 22): the update verdict of a cluster-scoped object, as for a
// resource (whyupdate.go): the live ClusterLocks covering it (by name or
// by selector on its labels), their level
// and ReadOnly condition, and, when a ReadOnly one does, the API server's
// answer to the user's server-side dry-run PATCH of its metadata, which
// lockguard's cluster update guard decides (webhook.ClusterLockHandler.
// DecideUpdate) with the user's identity.

// addClusterUpdate adds to r, the report on the cluster-scoped object t,
// its update verdict; none when the user may not list ClusterLocks (or
// they are not served).
func addClusterUpdate(ctx context.Context, c *clients, r *whyReport, t target) error {
	list, err := listLocks(ctx, c.clusterLocks().res)
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	// The object's labels: a selector ClusterLock covers it by them.
	obj, err := c.dynamic.Resource(t.mapping.Resource).Get(ctx, t.name, metav1.GetOptions{})
	missing := apierrors.IsNotFound(err)
	if err != nil && !missing {
		return err
	}
	gvk, now := t.mapping.GroupVersionKind, clock()
	o := lockv1alpha1.Object{Group: gvk.Group, Kind: gvk.Kind, Name: t.name}
	if !missing {
		o.Labels = obj.GetLabels()
	}
	var naming []lockv1alpha1.Lock
	for i := range list {
		cl := asClusterLock(&list[i])
		if cl.Covers(now, o) {
			naming = append(naming, list[i])
		}
	}
	slices.SortFunc(naming, func(a, b lockv1alpha1.Lock) int { return strings.Compare(a.Name, b.Name) })
	r.Update = freezeVerdict("ClusterLock", naming)
	if !r.Update.Frozen || missing {
		return nil
	}
	return probeUpdate(ctx, c, t.mapping.Resource, &unstructured.Unstructured{Object: obj.Object}, r.Update)
}
