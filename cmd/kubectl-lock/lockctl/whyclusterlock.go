package lockctl

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// kubectl lock why for ClusterLocks: the ClusterLock guard's code
// (webhook.ClusterLockHandler.DecideDelete), run on the API server's
// ClusterLocks, decides the DELETE of a cluster-scoped object besides the
// namespace and CRD guards.

// whyClusterObject answers why for a cluster-scoped object that only the
// ClusterLock guard decides (a ClusterRole, StorageClass,
// PersistentVolume, a CRD of another group, a cluster-scoped
// core.navique.com kind): the ClusterLocks naming or selecting it.
func whyClusterObject(ctx context.Context, c *clients, t target) (*whyReport, error) {
	api, err := apiReader(c)
	if err != nil {
		return nil, err
	}
	gvk := t.mapping.GroupVersionKind
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := api.Get(ctx, client.ObjectKey{Name: t.name}, obj); err != nil {
		return nil, err
	}
	r := newClusterWhyReport(whyTarget{Group: gvk.Group, Kind: gvk.Kind, Name: t.name}, whyDecision{DecidedBy: decidedByWebhook})
	return r, addClusterLocks(ctx, api, r, gvk, obj)
}

// addClusterLocks adds to r the ClusterLocks that name obj (kind gvk) or
// whose selector matches its labels, live or not, and the ClusterLock guard's verdict on its DELETE: a
// refusal blocks r's deletion (a second refusal, the namespace or CRD
// guard's, stays r's message and this one is a note); an Audit
// ClusterLock's warning is added to r's.
func addClusterLocks(ctx context.Context, api client.Client, r *whyReport, gvk schema.GroupVersionKind, obj *unstructured.Unstructured) error {
	list := &lockv1alpha1.ClusterLockList{}
	if err := api.List(ctx, list); err != nil {
		return err
	}
	r.ClusterLocks = []whyLock{}
	var enforcing []string
	now := clock()
	for i := range list.Items {
		cl := &list.Items[i]
		o := lockv1alpha1.Object{Group: gvk.Group, Kind: gvk.Kind, Name: obj.GetName(), Labels: obj.GetLabels()}
		if !cl.Selects(o) {
			continue
		}
		l := cl.AsLock()
		scope := cl.Spec.TargetRef.Kind + "/" + cl.Spec.TargetRef.Name
		if cl.HasSelector() {
			scope = cl.ScopeString()
		}
		r.ClusterLocks = append(r.ClusterLocks, whyLock{Name: cl.Name, Target: scope, Status: lockStatus(l), Reason: cl.Spec.Reason})
		if cl.Covers(now, o) && cl.Enforces() {
			enforcing = append(enforcing, cl.Name)
		}
	}
	req, err := deleteRequest(gvk, "", obj.GetName(), obj.Object)
	if err != nil {
		return err
	}
	h := webhook.NewClusterLockHandler(webhook.NewHandler(webhook.Config{Now: clock}), webhook.ClusterLockConfig{API: api, Now: clock})
	d := decisionOf(h.DecideDelete(ctx, req), decidedByWebhook)
	r.Deletion.Warnings = append(r.Deletion.Warnings, d.Warnings...)
	if !d.Blocked {
		return nil
	}
	if r.Deletion.Blocked {
		r.Notes = append(r.Notes, "The ClusterLock guard refuses it too: "+d.Message)
	} else {
		r.Deletion.Blocked, r.Deletion.DecidedBy, r.Deletion.Message, r.Deletion.Locks = true, d.DecidedBy, d.Message, nil
	}
	slices.Sort(enforcing)
	r.Deletion.Locks = append(r.Deletion.Locks, enforcing...)
	return nil
}
