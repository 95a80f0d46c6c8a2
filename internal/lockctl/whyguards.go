package lockctl

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/navique/lockguard/webhook"
)

// What lockguard's webhook does not decide yet, stated once: the cascade
// of an owner to its locked descendants (rule 6). Flip it when the cascade
// guard lands on main.

// decideCluster is lockguard's verdict on req, the DELETE of a Namespace
// or of a CustomResourceDefinition, and where it comes from (DecidedBy):
// the webhook's own namespace and CRD guards (LOCK-SPEC rules 11 and 12),
// with req as the API server sends it and no Lock cache (the guards then
// read the Locks from api, the API server).
func decideCluster(ctx context.Context, api client.Client, req webhook.Request) (admission.Response, string) {
	h := webhook.NewHandler(nil, nil, webhook.WithClusterGuards(nil, api, api.RESTMapper()))
	return h.Decide(ctx, req), decidedByWebhook
}

// cascadeNote explains an allowed delete of an owner whose cascade would
// reach n locked descendants, protected by locks. Once rule 6 is built, the
// webhook denies such a delete up front and the verdict says so instead.
func cascadeNote(n int, locks []string) string {
	return fmt.Sprintf("Deleting it is allowed today, but it owns %d locked object(s) (Lock(s) %v): "+
		"the owner is deleted, the garbage collector deletes its descendants down to the locked ones, and its delete of each of those is denied, "+
		"so the cascade stops half-way, leaving them (and what they own) behind. "+
		"Once LOCK-SPEC rule 6 is built, lockguard will deny the owner's delete up front. "+
		"To delete it all, delete the Lock(s) first; to keep the descendants, delete it with --cascade=orphan.", n, locks)
}
