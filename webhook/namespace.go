package webhook

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// namespaceGuard decides the DELETE of Namespaces.
type namespaceGuard struct{ *clusterGuards }

// decide answers the DELETE of a Namespace.
func (g namespaceGuard) decide(ctx context.Context, req Request, kind string) (decision, bool) {
	if kind != GuardNamespace {
		return decision{}, false
	}
	return g.run(ctx, GuardNamespace, func(ctx context.Context) decision {
		return g.decideNamespace(ctx, req)
	}), true
}

// decideNamespace answers the DELETE of a Namespace (docs/contract.md rule 11): it
// is denied while a live Lock in it protects an object that exists and is
// not being deleted, as the API server says, naming all of them. A
// namespace already terminating is allowed (its delete was decided when
// it began); one whose live Locks all point at missing targets is allowed
// with a warning. When only Locks in Audit enforcement would protect, it
// is allowed with what they would refuse (decision.refusedBy,
// docs/contract.md rule 20).
func (g namespaceGuard) decideNamespace(ctx context.Context, req Request) decision {
	d := decision{guard: GuardNamespace}
	ns := req.Target().Name
	if ns == "" {
		d.resp = errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: the DELETE of a Namespace names no namespace"))
		return d
	}
	if req.OldObject.Metadata.DeletionTimestamp != nil || req.OldObject.Status.Phase == string(corev1.NamespaceTerminating) {
		d.resp = admission.Allowed("the namespace is already terminating")
		return d
	}
	c, err := g.check(ctx, lockScope{ns: ns}, 0)
	switch {
	case err != nil:
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf(
			"lockguard could not verify the Locks of namespace %s, so its delete is refused; retry when lockguard is ready: %w", ns, err))
	case len(c.protected) == 0 && len(c.audit) == 0 && len(c.missing) > 0:
		d.resp = admission.Allowed("").WithWarnings(fmt.Sprintf(
			"namespace %s holds Lock(s) %v whose targets do not exist: they protect nothing", ns, lockNames(c.missing, false, 0)))
	default:
		d = d.refusedBy(c.protected, c.audit, func(locks []lockv1alpha1.Lock) string { return NamespaceDenialMessage(ns, locks) })
	}
	return d
}

// NamespaceDenialMessage is the message of a denied namespace delete: the
// contract's sentence naming the Locks (sorted; at most maxNamed, then how
// many more), each Lock's target and reason, and, when not all are named,
// how to list them.
func NamespaceDenialMessage(ns string, locks []lockv1alpha1.Lock) string {
	msg := fmt.Sprintf("namespace is protected by Lock(s) %v; delete the Lock(s) before deleting this namespace %s",
		lockNames(locks, false, 0), describeLocks(locks, false))
	if len(locks) > maxNamed {
		msg += "; list them all with: kubectl get locks -n " + ns
	}
	return msg
}
