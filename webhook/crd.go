package webhook

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// crdGuard decides the DELETE of CustomResourceDefinitions.
type crdGuard struct{ *clusterGuards }

// decide answers the DELETE of a CustomResourceDefinition.
func (g crdGuard) decide(ctx context.Context, req Request, kind string) (decision, bool) {
	if kind != GuardCRD {
		return decision{}, false
	}
	return g.run(ctx, GuardCRD, func(ctx context.Context) decision {
		resp, locks, more := g.decideCRD(ctx, req)
		return decision{guard: GuardCRD, resp: resp, locks: locks, more: more}
	}), true
}

// decideCRD answers the DELETE of a CustomResourceDefinition (docs/contract.md
// rule 12), which removes its objects without admission: the CRD of a
// core.navique.com kind is denied while a live Lock protects an object of
// that kind that exists, and the Lock CRD while any live Lock exists, as
// the API server says. CRDs of other groups are allowed (the webhook
// configuration does not even send them). It returns the Locks that deny
// the delete, and how many more do that it does not return.
//
// It reads the Locks of the CRD's kind alone, and for the Lock CRD only
// the first few live Locks: a CRD delete, forged or not, never copies or
// holds every Lock of the cluster.
func (g crdGuard) decideCRD(ctx context.Context, req Request) (admission.Response, []lockv1alpha1.Lock, int) {
	spec := req.OldObject.Spec
	if spec.Group != lockv1alpha1.Group {
		return admission.Allowed("not a " + lockv1alpha1.Group + " CustomResourceDefinition"), nil, 0
	}
	name := req.Target().Name
	if spec.Names.Kind == "" {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: the CustomResourceDefinition %q being deleted has no spec.names.kind", name)), nil, 0
	}
	kind := spec.Names.Kind
	refused := func(err error) admission.Response {
		return errored(http.StatusServiceUnavailable, fmt.Errorf(
			"lockguard could not verify the Locks on CustomResourceDefinition %s, so its delete is refused; retry when lockguard is ready: %w", name, err))
	}
	if kind == "Lock" {
		// Every live Lock holds the Lock CRD back, whatever its target.
		live, more, err := g.locks.anyLive(ctx)
		if err != nil {
			return refused(err), nil, 0
		}
		if len(live) > 0 {
			return admission.Denied(crdDenialMessage(live, more) + "; deleting the Lock CustomResourceDefinition would delete every Lock"), live, more
		}
		return admission.Allowed(""), nil, 0
	}
	protected, missing, unchecked, err := g.check(ctx, lockScope{kind: schema.GroupKind{Group: spec.Group, Kind: kind}}, maxNamed)
	switch {
	case err != nil:
		return refused(err), nil, 0
	case len(protected) > 0:
		return admission.Denied(crdDenialMessage(protected, unchecked)), protected, unchecked
	case len(missing) > 0:
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"Lock(s) %v target %s objects that do not exist: they protect nothing", lockNames(missing, true, 0), kind)), nil, 0
	}
	return admission.Allowed(""), nil, 0
}

// CRDDenialMessage is the message of a denied CustomResourceDefinition
// delete: the Locks as namespace/name (sorted; at most maxNamed, then how
// many more), and each Lock's target and reason.
func CRDDenialMessage(locks []lockv1alpha1.Lock) string { return crdDenialMessage(locks, 0) }

// crdDenialMessage is CRDDenialMessage with unchecked more Locks, not in
// locks, counted in "and N more": on the kind,
// those whose targets the guard did not check; on the Lock CRD, those it
// did not copy.
func crdDenialMessage(locks []lockv1alpha1.Lock, unchecked int) string {
	msg := fmt.Sprintf("customresourcedefinition is protected by Lock(s) %v; delete the Lock(s) before deleting this CustomResourceDefinition %s",
		lockNames(locks, true, unchecked), describeLocks(locks, true))
	if len(locks)+unchecked > maxNamed {
		msg += "; list them all with: kubectl get locks -A"
	}
	return msg
}
