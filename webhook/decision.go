package webhook

import (
	"context"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// GuardObject, GuardCascade, GuardNamespace, GuardCRD, GuardReadOnly
// (the update guard) and GuardClusterLock name the guard that decided a request, as the
// metrics and audit annotations count it.
const (
	GuardObject    = "object"
	GuardCascade   = "cascade"
	GuardNamespace = "namespace"
	GuardCRD       = "crd"
	GuardReadOnly  = "readonly"
	// GuardClusterLock is the ClusterLock guard's (clusterlock.go).
	GuardClusterLock = "clusterlock"
	// GuardCreate is the admission of Lock creates (create.go), counted by
	// lockguard_admission_reviews_total only.
	GuardCreate = "create"
	// GuardClusterCreate is the admission of ClusterLock creates
	// (clustercreate.go), counted as GuardCreate is.
	GuardClusterCreate = "clustercreate"
)

// Decisions counted by lockguard_admission_reviews_total.
const (
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
	DecisionErrored = "errored"
)

// decisionOf is resp as lockguard_admission_reviews_total counts it.
func decisionOf(resp admission.Response) string {
	switch {
	case resp.Allowed:
		return DecisionAllowed
	case resp.Result != nil && resp.Result.Code == 403:
		return DecisionDenied
	}
	return DecisionErrored
}

// guardOf names the guard of the DELETE of a kind, when it is not the
// object guard: the namespace guard's and the CRD guard's. The update
// guard's Handler sends every UPDATE to the update guard.
var guardOf = map[schema.GroupKind]string{
	{Kind: "Namespace"}: GuardNamespace,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}: GuardCRD,
}

// notGuarded is a Handler's answer to a request of an operation its
// guards do not answer.
var notGuarded = map[admissionv1.Operation]string{
	admissionv1.Delete: "not a DELETE",
	admissionv1.Update: "not an UPDATE",
}

// guard is one of a Handler's guards (object.go, cascadedecision.go,
// namespace.go, crd.go; the update guard's Handler: update.go).
// Handler.Decide asks them in turn: the first that refuses a request
// decides, and a later guard's answer replaces an earlier one that allows
// it (the cascade guard's, after the object guard's).
type guard interface {
	// decide answers req, sent to the guard named kind (guardOf), and
	// reports whether it has an answer: false leaves req to the other
	// guards.
	decide(ctx context.Context, req Request, kind string) (decision, bool)
}

// decision is a guard's answer to a request.
type decision struct {
	// guard names the guard in metrics and audit annotations.
	guard string
	resp  admission.Response
	// locks are the Locks that deny the request, and more counts those
	// that deny it too but are not in locks.
	locks []lockv1alpha1.Lock
	more  int
	// audit are the live Locks in Audit enforcement that would deny the
	// request, which no Lock denies; wouldDeny is the refusal they would
	// give (finisher.finish warns with it and records it).
	audit     []lockv1alpha1.Lock
	wouldDeny string
	// clusterLocks are the ClusterLocks that refuse the request, and
	// clusterAudit those in Audit enforcement that would, when none
	// refuses (the ClusterLock guards': clusterRefusal), with wouldDeny
	// their refusal; locks and audit are then empty.
	clusterLocks []lockv1alpha1.ClusterLock
	clusterAudit []lockv1alpha1.ClusterLock
	// pierced is set when an exception let the request through Locks
	// that refused it (exceptions.pierce; locks is then empty).
	pierced *pierced
	// kind is the kind of the object the request writes when the guard
	// read it elsewhere than in the request (an UPDATE through a
	// subresource: a scale's review names autoscaling/v1 Scale); zero:
	// the request's.
	kind metav1.GroupVersionKind
}

// errored is admission.Errored with a Status reason that matches its code,
// so clients see ServiceUnavailable or BadRequest rather than an unknown error.
func errored(code int32, err error) admission.Response {
	resp := admission.Errored(code, err)
	switch code {
	case http.StatusServiceUnavailable:
		resp.Result.Reason = metav1.StatusReasonServiceUnavailable
	case http.StatusBadRequest:
		resp.Result.Reason = metav1.StatusReasonBadRequest
	}
	return resp
}

// refusal returns d answered by locks, the live Locks that would refuse
// its request, message the refusal naming some of them: denied by those
// that enforce (Lock.Enforces), naming only them; when none does,
// allowed, with what the audit Locks would refuse (docs/contract.md rule
// 20: an audit Lock refuses nothing and records what it would refuse);
// allowed when locks is empty. Every guard that refuses for the Locks of
// one object answers through it, or through refusedBy.
func (d decision) refusal(locks []lockv1alpha1.Lock, message func([]lockv1alpha1.Lock) string) decision {
	enforcing := slices.DeleteFunc(slices.Clone(locks), audits)
	return d.refusedBy(enforcing, locks, message)
}

// refusedBy is refusal for a guard that finds the Locks that enforce
// (enforcing) apart from the ones in Audit (audit; the namespace, CRD and
// cascade guards look for these only when no Lock enforces): denied by
// enforcing, naming only them; otherwise allowed, with the refusal the
// audit Locks would give (finisher.finish warns with it, counts it and
// records it); allowed when both are empty.
func (d decision) refusedBy(enforcing, audit []lockv1alpha1.Lock, message func([]lockv1alpha1.Lock) string) decision {
	switch {
	case len(enforcing) > 0:
		d.resp, d.locks = admission.Denied(message(enforcing)), enforcing
	case len(audit) > 0:
		d.resp, d.audit, d.wouldDeny = admission.Allowed(""), audit, message(audit)
	default:
		d.resp = admission.Allowed("")
	}
	return d
}
