package lockctl

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// decideCluster is lockguard's verdict on req, the DELETE of a Namespace
// or of a CustomResourceDefinition, and where it comes from (DecidedBy):
// the webhook's own namespace and CRD guards (docs/contract.md rules 11 and 12),
// with req as the API server sends it and no Lock cache (the guards then
// read the Locks from api, the API server). served are the group's kinds
// whose objects a selector Lock without kinds may cover (the namespace
// guard's webhook.ClusterConfig.Served); nil for a CRD.
func decideCluster(ctx context.Context, api client.Client, req webhook.Request, served []schema.GroupKind) (admission.Response, string) {
	cluster := &webhook.ClusterConfig{API: api, Kinds: api.RESTMapper()}
	if served != nil {
		cluster.Served = func() ([]schema.GroupKind, error) { return served, nil }
	}
	h := webhook.NewHandler(webhook.Config{Cluster: cluster, Now: clock})
	return h.Decide(ctx, req), decidedByWebhook
}

// selectorCovers returns whether the live selector Lock l covers its
// namespace (kind empty and an empty selector) or an existing object, of
// kind when set, among objects (its namespace's objects of the group).
func selectorCovers(l *lockv1alpha1.Lock, kind schema.GroupKind, objects []node) bool {
	now := clock()
	if kind.Empty() && l.CoversNamespace(now) {
		return true
	}
	for _, o := range objects {
		gk := o.gvk.GroupKind()
		if (kind.Empty() || gk == kind) && o.meta.DeletionTimestamp == nil &&
			l.Covers(lockv1alpha1.Object{Namespace: l.Namespace, Group: gk.Group, Kind: gk.Kind, Name: o.meta.Name, Labels: o.meta.Labels}, now) {
			return true
		}
	}
	return false
}

// cascadeNote explains the delete of an owner whose cascade would reach n
// locked descendants, protected by locks: lockguard's cascade guard
// (docs/contract.md rule 6) denies it up front, in its default mode, which is the
// verdict why reports.
func cascadeNote(n int, locks []string) string {
	return fmt.Sprintf("Deleting it is denied: the garbage collector would delete %d locked object(s) it owns (Lock(s) %v), "+
		"and lockguard's cascade guard (docs/contract.md rule 6) refuses such a delete whole, before anything is deleted "+
		"(unless the chart sets guards.cascade to Warn or Off, which why cannot see). "+
		"To delete it all, delete the Lock(s) first; to keep the descendants, delete it with --cascade=orphan.", n, locks)
}
