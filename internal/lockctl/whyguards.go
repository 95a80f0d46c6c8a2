package lockctl

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/navique/lockguard/webhook"
)

// What lockguard's webhook does not decide yet, stated once: the deletes
// of namespaces and CRDs (LOCK-SPEC rules 11 and 12, issue 12) and the
// cascade of an owner to its locked descendants (rule 6). Flip these when
// the guards land on main.

// decideCluster is lockguard's verdict on req, the DELETE of a Namespace
// or of a CustomResourceDefinition, and where it comes from (DecidedBy).
// api reads the API server.
//
// On main, lockguard does not guard these deletes (README, Limits): the
// chart's webhook configuration sends lockguard only the DELETEs of
// core.navique.com resources, so a namespace's or a CRD's never reaches it
// and is not blocked by it. When the namespace and CRD guards land
// (webhook.WithClusterGuards, branch guards), the body becomes the
// webhook's own decision, with req already as the API server sends it (no
// Lock cache: the guards then read the Locks from api):
//
//	return webhook.NewHandler(nil, nil, webhook.WithClusterGuards(nil, api, api.RESTMapper())).Decide(ctx, req), decidedByWebhook
//
// (checked against branch guards at c57edba: e2e/plugin then passes,
// with the namespace and the CRD denied by both why and the API server).
func decideCluster(_ context.Context, _ client.Client, req webhook.Request) (admission.Response, string) {
	return admission.Allowed(fmt.Sprintf(
		"lockguard does not guard the deletion of a %s: its webhook is not sent such deletes (README, Limits)", req.Kind.Kind)), decidedByNotGuarded
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
