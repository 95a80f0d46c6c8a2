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
		return g.decideCRD(ctx, req)
	}), true
}

// decideCRD answers the DELETE of a CustomResourceDefinition (docs/contract.md
// rule 12), which removes its objects without admission: the CRD of a
// core.navique.com kind is denied while a live Lock protects an object of
// that kind that exists, and the Lock CRD while any live Lock exists, as
// the API server says. CRDs of other groups are allowed (the webhook
// configuration does not even send them). The decision holds the Locks
// that deny the delete, and counts (more) how many more do that it does
// not hold. When only Locks in Audit enforcement would deny it, it is
// allowed with what they would refuse (decision.refusedBy,
// docs/contract.md rule 20).
//
// It reads the Locks of the CRD's kind alone, and for the Lock CRD only
// the first few live Locks: a CRD delete, forged or not, never copies or
// holds every Lock of the cluster.
func (g crdGuard) decideCRD(ctx context.Context, req Request) decision {
	d := decision{guard: GuardCRD}
	spec := req.OldObject.Spec
	// The group's CRDs, and those of the kinds of other groups the
	// installation opts in (docs/contract.md rule 21): deleting a CRD
	// deletes its objects with no admission of theirs.
	optedIn := spec.Group != lockv1alpha1.Group && lockv1alpha1.IsOptedIn(schema.GroupKind{Group: spec.Group, Kind: spec.Names.Kind})
	if spec.Group != lockv1alpha1.Group && !optedIn {
		d.resp = admission.Allowed("not a " + lockv1alpha1.Group + " CustomResourceDefinition, nor one of an opted-in kind")
		return d
	}
	name := req.Target().Name
	if spec.Names.Kind == "" {
		d.resp = errored(http.StatusBadRequest, fmt.Errorf("lockguard could not verify Locks: the CustomResourceDefinition %q being deleted has no spec.names.kind", name))
		return d
	}
	kind := spec.Names.Kind
	refused := func(err error) decision {
		d.resp = errored(http.StatusServiceUnavailable, fmt.Errorf(
			"lockguard could not verify the Locks on CustomResourceDefinition %s, so its delete is refused; retry when lockguard is ready: %w", name, err))
		return d
	}
	// refusedBy of enforcing or, when none, of audit: more counts the
	// Locks past those of the refusal, in its message and in the audit
	// annotation of a denial.
	refusal := func(enforcing []lockv1alpha1.Lock, more int, audit []lockv1alpha1.Lock, auditMore int, suffix string) decision {
		if len(enforcing) == 0 {
			more = auditMore
		}
		d = d.refusedBy(enforcing, audit, func(locks []lockv1alpha1.Lock) string { return crdDenialMessage(locks, more) + suffix })
		if !d.resp.Allowed {
			d.more = more
		}
		return d
	}
	if kind == "Lock" && !optedIn {
		// Every live Lock holds the Lock CRD back, whatever its target.
		live, more, audit, auditMore, err := g.locks.anyLive(ctx)
		if err != nil {
			return refused(err)
		}
		return refusal(live, more, audit, auditMore, "; deleting the Lock CustomResourceDefinition would delete every Lock")
	}
	c, err := g.check(ctx, lockScope{kind: schema.GroupKind{Group: spec.Group, Kind: kind}}, maxNamed)
	switch {
	case err != nil:
		return refused(err)
	case len(c.protected) == 0 && len(c.audit) == 0 && len(c.missing) > 0:
		d.resp = admission.Allowed("").WithWarnings(fmt.Sprintf(
			"Lock(s) %v target %s objects that do not exist: they protect nothing", lockNames(c.missing, true, 0), kind))
		return d
	}
	return refusal(c.protected, c.unchecked, c.audit, c.auditUnchecked, "")
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
