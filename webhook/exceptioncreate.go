package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// The admission of LockException CREATEs (docs/contract.md rule 20): an
// exception lets its user through Locks, so creating one is checked as
// lifting them would be. lockguard refuses the create unless the
// exception names its creator (spec.user is the request's username: a
// record of who created it, without a mutating webhook), expires within
// MaxExceptionLifetime, and the creator holds the verb break-glass on
// every Lock it names, asked of the API server with a
// SubjectAccessReview carrying the request's whole identity.

// ExceptionPath is where lockguard admits LockException CREATEs (the
// chart's exception.lockguard.core.navique.com entry, failurePolicy Fail).
const ExceptionPath = "/validate-exception"

// AccessReviewer creates SubjectAccessReviews (in lockguard, the
// manager's client; the chart grants create on subjectaccessreviews).
type AccessReviewer interface {
	Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error
}

// ExceptionOptions configure the ExceptionHandler.
type ExceptionOptions struct {
	// Gate bounds the reading of reviews (the webhook server's); nil: a
	// Gate of its own.
	Gate *transport.Gate
	// Reviews asks the API server whether the creator holds
	// BreakGlassVerb on each Lock; nil: every create is refused.
	Reviews AccessReviewer
	// Now is lockguard's clock (nil: time.Now), as for Locks.
	Now func() time.Time
	// BesidePolicy says that the chart's ValidatingAdmissionPolicy
	// (mode both) refuses deletes and updates of locked objects too: it
	// cannot read exceptions, so each create is allowed with a warning
	// saying the exception will not get through it.
	BesidePolicy bool
}

// ExceptionHandler is the handler of ExceptionPath.
type ExceptionHandler struct{ o ExceptionOptions }

// NewExceptionHandler returns the handler of ExceptionPath.
func NewExceptionHandler(o ExceptionOptions) *ExceptionHandler {
	if o.Gate == nil {
		o.Gate = transport.NewGate(transport.Limits{}, nil)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &ExceptionHandler{o: o}
}

// ServeHTTP answers an AdmissionReview posted as JSON within the Gate,
// decoded whole (an exception is small).
func (x *ExceptionHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	transport.ServeReview(x.o.Gate, w, r, transport.DecodeReview, x.Handle)
}

// Bounds of what the handler reads from a review: the Locks an exception
// names (the CRD's bound too), and the size of the identity each
// SubjectAccessReview copies.
const (
	maxExceptionLocks    = 16
	maxIdentityBytes     = 64 << 10
	exceptionReviewLimit = 3 * time.Second
)

// PolicyWarning is the admission warning of an exception created while
// the chart's policy runs beside lockguard's webhook (mode both).
const PolicyWarning = "lockguard: the chart's ValidatingAdmissionPolicy (mode both) refuses deletes and updates of locked objects from their annotation and cannot read LockExceptions: this exception lets nothing through it (docs/limits.md)"

// Handle decides the CREATE of a LockException.
func (x *ExceptionHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Kind.Group != lockv1alpha1.Group || req.Kind.Kind != "LockException" || req.SubResource != "" || req.Operation != admissionv1.Create {
		return admission.Allowed("")
	}
	var e lockv1alpha1.LockException
	if err := json.Unmarshal(req.Object.Raw, &e); err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not decode the LockException being created in %s: %w", req.Namespace, err))
	}
	if err := lockv1alpha1.ValidateExceptionCreate(&e.Spec, req.UserInfo.Username, x.o.Now()); err != nil {
		return admission.Denied("LockException refused: " + err.Error())
	}
	locks := slices.Clone(e.Spec.Locks)
	slices.Sort(locks)
	if locks = slices.Compact(locks); len(locks) > maxExceptionLocks {
		return admission.Denied(fmt.Sprintf("LockException refused: spec.locks names %d Locks, at most %d", len(locks), maxExceptionLocks))
	}
	if n := identitySize(req.UserInfo); n > maxIdentityBytes {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not check the verb %s: the request's identity is %d bytes, over %d", lockv1alpha1.BreakGlassVerb, n, maxIdentityBytes))
	}
	if x.o.Reviews == nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not check the verb %s: it has no access reviewer", lockv1alpha1.BreakGlassVerb))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, exceptionReviewLimit)
		defer cancel()
	}
	for _, name := range locks {
		allowed, err := x.breakGlass(ctx, req.UserInfo, req.Namespace, name)
		if err != nil {
			return errored(http.StatusServiceUnavailable, fmt.Errorf("lockguard could not check the verb %s on Lock %s/%s, so the LockException is refused; retry: %w",
				lockv1alpha1.BreakGlassVerb, req.Namespace, name, err))
		}
		if !allowed {
			return admission.Denied(lockv1alpha1.BreakGlassMessage(req.Namespace, name))
		}
	}
	resp := admission.Allowed("")
	if x.o.BesidePolicy {
		resp = resp.WithWarnings(PolicyWarning)
	}
	return resp
}

// breakGlass asks the API server whether user holds BreakGlassVerb on
// Lock ns/name.
func (x *ExceptionHandler) breakGlass(ctx context.Context, user authenticationv1.UserInfo, ns, name string) (bool, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extraOf(user.Extra),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: lockv1alpha1.BreakGlassVerb, Group: lockv1alpha1.Group, Resource: "locks", Name: name,
		},
	}}
	if err := x.o.Reviews.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed && !sar.Status.Denied, nil
}

// extraOf is the request's extra identity as a SubjectAccessReview takes it.
func extraOf(extra map[string]authenticationv1.ExtraValue) map[string]authorizationv1.ExtraValue {
	if len(extra) == 0 {
		return nil
	}
	out := make(map[string]authorizationv1.ExtraValue, len(extra))
	for k, v := range extra {
		out[k] = authorizationv1.ExtraValue(v)
	}
	return out
}

// identitySize is the bytes of user's strings, each SubjectAccessReview
// copies.
func identitySize(user authenticationv1.UserInfo) int {
	n := len(user.Username) + len(user.UID)
	for _, g := range user.Groups {
		n += len(g)
	}
	for k, vs := range user.Extra {
		n += len(k)
		for _, v := range vs {
			n += len(v)
		}
	}
	return n
}
