package lockctl

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/navique/lockguard/webhook"
)

// decideCluster is lockguard's verdict on req, the DELETE of a Namespace
// or of a CustomResourceDefinition, and where it comes from (DecidedBy):
// the webhook's own namespace and CRD guards (LOCK-SPEC rules 11 and 12),
// with req as the API server sends it and no Lock cache (the guards then
// read the Locks from api, the API server).
func decideCluster(ctx context.Context, api client.Client, req webhook.Request) (admission.Response, string) {
	h := webhook.NewHandler(nil, nil, webhook.WithClusterGuards(nil, api, api.RESTMapper()))
	return h.Decide(ctx, req), decidedByWebhook
}

// cascadeNote explains the delete of an owner whose cascade would reach n
// locked descendants, protected by locks: lockguard's cascade guard
// (LOCK-SPEC rule 6) denies it up front, in its default mode, which is the
// verdict why reports.
func cascadeNote(n int, locks []string) string {
	return fmt.Sprintf("Deleting it is denied: the garbage collector would delete %d locked object(s) it owns (Lock(s) %v), "+
		"and lockguard's cascade guard (LOCK-SPEC rule 6) refuses such a delete whole, before anything is deleted "+
		"(unless the chart sets guards.cascade to Warn or Off, which why cannot see). "+
		"To delete it all, delete the Lock(s) first; to keep the descendants, delete it with --cascade=orphan.", n, locks)
}
