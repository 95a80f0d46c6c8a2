package peers

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// LeaseGuardPath is the path of the webhook entry that keeps the identity
// Leases lockguard's own (the chart's peer-leases.lockguard.core.navique.com,
// on API servers without admissionregistration.k8s.io/v1 policies).
const LeaseGuardPath = "/validate-peer-lease"

// LeaseWriteVerb is the RBAC verb on leases that lets a principal create,
// update or delete the identity Leases (those labelled LeaseGroupLabel)
// in lockguard's namespace: the chart grants it to lockguard's
// ServiceAccount only; a cluster admin holding every verb has it too.
// The built-in edit and admin roles, and other controllers' Roles, list
// their verbs and do not.
const LeaseWriteVerb = "lockguard-peer"

// LeaseGuardMessage is the refusal of a write of an identity Lease in
// namespace by a principal without LeaseWriteVerb.
func LeaseGuardMessage(namespace string) string {
	return fmt.Sprintf("only lockguard writes the identity Leases of its replicas (label %s): "+
		"the view of the replicas in the peer protocol assumes it; this needs the verb %s on leases in %s",
		LeaseGroupLabel, LeaseWriteVerb, namespace)
}

// NewLeaseGuard returns the handler of LeaseGuardPath. The API server
// calls it only for writes of the identity Leases by principals without
// LeaseWriteVerb (the entry's objectSelector and matchConditions, which
// exempt lockguard's own writes, so that they never wait for it): it
// refuses every request. It reads nothing and writes nothing.
//
// The view of the replicas (Leases) assumes that only the replicas write
// their Leases: a Lease deleted by someone else drops its replica from
// the others' views while it still counts itself as one, and the others
// admit Lock creates without telling it (docs/contract.md rule 17).
func NewLeaseGuard() *admission.Webhook {
	return &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		return admission.Denied(LeaseGuardMessage(req.Namespace))
	})}
}
