package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/transport"
)

// The admission of Lock CREATEs, beside the DELETE decision: only a Lock
// create turns protection on, so what must be true from the moment a
// create returns is done here, before it is allowed, by three
// collaborators, each switched on by its own flag:
//
//   - the peer announcement (lockguard's --peers, --peers-file or
//     --peer-service): every other replica is told of the Lock, so that
//     none allows a delete of its target from a cache that lacks it
//     (internal/peers);
//   - the namespace guard's label (--namespace-guard, on by default):
//     HasLocksLabel goes on the Lock's namespace, so that the namespace
//     guard's webhook entry sees the namespace at once. The reconciler
//     keeps the label afterwards (controller/namespaces.go); with the peer
//     protocol, it does not take it off while the create is pending;
//   - the target's protected label (--protect-resource): ProtectedLabel
//     goes on the target of an enforcing targetRef Lock of an opted-in
//     kind, so that the chart's protect-locked entry (objectSelector on
//     it, matched against the object itself) sends its DELETE to
//     lockguard at once. The reconciler keeps it afterwards
//     (controller/protectedlabel.go); ProtectedPendingAnnotation keeps it
//     until the Lock reaches the reconciler's cache. A target that does
//     not exist yet is not labelled here (nothing to delete); the
//     reconciler labels it when it appears. Likewise each object of an
//     opted-in kind that an enforcing selector Lock covers at its create,
//     at most SelectorLabelCap of them (createselector.go); those that
//     appear or match later are labelled by the reconciler (docs/optin.md).
//
// They run only for a live Lock (one that protects something) and not for
// a dry run, and only once the Lock is one the API server could have
// admitted (Lock.ValidateAdmitted: a review of any other is forged, and
// is refused before any keeps or writes anything of it). A create one
// could not complete is refused, retryably.

// CreatePath is where lockguard admits Lock CREATEs (the chart's
// create.lockguard.core.navique.com entry).
const CreatePath = "/validate-lock-create"

// Announcer tells the other replicas of a Lock create (in lockguard,
// internal/peers).
type Announcer interface {
	// AnnounceLock tells every replica of the create of l, a live Lock
	// with a name and a UID, and returns once all have acknowledged; an
	// error refuses the create, retryably.
	AnnounceLock(ctx context.Context, l *lockv1alpha1.Lock) error
}

// NamespaceLabeler puts the namespace guard's label, HasLocksLabel, on a
// namespace.
type NamespaceLabeler interface {
	LabelNamespace(ctx context.Context, ns string) error
}

// NamespaceLabelerFunc adapts a function to a NamespaceLabeler.
type NamespaceLabelerFunc func(ctx context.Context, ns string) error

// LabelNamespace calls f.
func (f NamespaceLabelerFunc) LabelNamespace(ctx context.Context, ns string) error { return f(ctx, ns) }

// NamespaceLabel returns the NamespaceLabeler that writes through c (in
// lockguard, the manager's client): one merge patch of the namespace's
// metadata, the label and HasLocksPendingAnnotation with the time. The
// mark is new with each create, even when the label is there already, so
// that a reconciler's removal of the label judged before it fails
// (controller/namespaces.go) rather than undo the create's.
func NamespaceLabel(c client.Writer) NamespaceLabeler {
	return NamespaceLabelerFunc(func(ctx context.Context, ns string) error {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		obj.SetName(ns)
		patch := lockv1alpha1.PendingMarkPatch(lockv1alpha1.HasLocksLabel, lockv1alpha1.HasLocksPendingAnnotation, time.Now())
		if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("putting the %s label on namespace %s: %w", lockv1alpha1.HasLocksLabel, ns, err)
		}
		return nil
	})
}

// TargetLabeler puts ProtectedLabel (with ProtectedPendingAnnotation) on
// the target of a Lock being created, when the target is of an opted-in
// kind (docs/optin.md): the chart's protect-locked entry selects on the
// label, so the target's DELETE reaches lockguard from the create's answer
// on, whatever the API server's namespace cache says of HasLocksLabel.
type TargetLabeler interface {
	// LabelTarget labels the object key names, when its kind is opted in,
	// and returns nil without writing when it is not (a core.navique.com
	// kind, or one not served). A NotFound error (no such object yet) lets
	// the create through: the reconciler labels the object when it
	// appears; any other error refuses the create, retryably.
	// by is the name of the Lock being created, which the pending mark
	// names (the reconciler drops the mark once that Lock is cached).
	LabelTarget(ctx context.Context, key lockv1alpha1.TargetKey, by string) error
}

// TargetLabelerFunc adapts a function to a TargetLabeler.
type TargetLabelerFunc func(ctx context.Context, key lockv1alpha1.TargetKey, by string) error

// LabelTarget calls f.
func (f TargetLabelerFunc) LabelTarget(ctx context.Context, key lockv1alpha1.TargetKey, by string) error {
	return f(ctx, key, by)
}

// OptedInResolver resolves a kind for the Lock create's labels: the
// GroupVersionKind of an opted-in kind as served, false for any other
// kind; an error when it cannot tell (discovery failing for a kind the
// installation opts in), which refuses the create, retryably, rather than
// allow it unlabelled.
type OptedInResolver func(gk schema.GroupKind) (schema.GroupVersionKind, bool, error)

// ProtectedTargetLabel returns the TargetLabeler that resolves a kind with
// optedIn and writes through c (in lockguard, the manager's client, so
// lockguard's own identity, which the update guard exempts): one merge
// patch of the target's metadata, the label and the pending mark.
func ProtectedTargetLabel(optedIn OptedInResolver, c client.Writer) TargetLabeler {
	return TargetLabelerFunc(func(ctx context.Context, key lockv1alpha1.TargetKey, by string) error {
		if key.Group == lockv1alpha1.Group {
			return nil // the object guard's entry sends its deletes
		}
		gvk, ok, err := optedIn(key.GroupKind())
		if err != nil {
			return fmt.Errorf("resolving the kind %s of %s/%s: %w", key.GroupKind(), key.Namespace, key.Name, err)
		}
		if !ok {
			return nil // not opted in: the Lock is InvalidTarget
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		obj.SetNamespace(key.Namespace)
		obj.SetName(key.Name)
		patch := lockv1alpha1.PendingMarksPatchBy([]string{lockv1alpha1.ProtectedLabel}, lockv1alpha1.ProtectedPendingAnnotation, time.Now(), by)
		if err := c.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("putting the %s label on %s %s/%s: %w", lockv1alpha1.ProtectedLabel, key.Kind, key.Namespace, key.Name, err)
		}
		return nil
	})
}

// CreateOptions configure a CreateHandler. A nil collaborator is off.
type CreateOptions struct {
	// Gate bounds the reviews with every other path of the webhook
	// server; default: a Gate of its own.
	Gate *transport.Gate
	// Announcer is told of each Lock create before it is allowed.
	Announcer Announcer
	// Metrics counts the answers (lockguard_admission_reviews_total, guard
	// create); nil: none.
	Metrics *Metrics
	// Labeler labels the Lock's namespace before the create is allowed,
	// after the announcement.
	Labeler NamespaceLabeler
	// Targets labels the target of an enforcing targetRef Lock before the
	// create is allowed, after the namespace.
	Targets TargetLabeler
	// Selected, with Targets, lists the objects of opted-in kinds that an
	// enforcing selector Lock covers, which Targets labels before the
	// create is allowed, after the namespace (createselector.go).
	Selected SelectedLister
	// Now is the clock a create's expiresAt is compared with (the
	// delete guards' Config.Now); nil: time.Now.
	Now func() time.Time
}

// CreateHandler admits Lock CREATEs (CreatePath).
type CreateHandler struct {
	o CreateOptions
}

// NewCreateHandler returns the admission of Lock creates with o's
// collaborators.
func NewCreateHandler(o CreateOptions) *CreateHandler {
	if o.Gate == nil {
		o.Gate = transport.NewGate(transport.Limits{}, nil)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &CreateHandler{o: o}
}

// Handle admits a Lock create once the Announcer, the Labeler and Targets
// (with Selected), those that are on, have done their part. It refuses,
// dry run or not, the create of a Lock that has already expired
// (ExpiredMessage), and that of a selector Lock matching more than
// SelectorLabelCap objects to label (SelectorCapMessage; a dry run lists
// them too, and writes nothing). It allows every other request, dry runs
// (which write nothing) and the creates of Locks that protect nothing
// without calling any other collaborator.
func (c *CreateHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := c.handle(ctx, req)
	c.o.Metrics.reviewed(GuardCreate, resp)
	return resp
}

// handle is Handle's answer.
func (c *CreateHandler) handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create || req.Kind.Kind != "Lock" {
		return admission.Allowed("")
	}
	var l lockv1alpha1.Lock
	if err := json.Unmarshal(req.Object.Raw, &l); err != nil {
		if c.off() {
			return admission.Allowed("") // Nothing to keep of it, and no expiry to judge.
		}
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not decode the Lock: %w", err))
	}
	now := c.o.Now()
	if l.ExpiredAt(now) {
		// docs/contract.md rule 19: a Lock created expired would protect
		// nothing while looking like it does.
		return admission.Denied(ExpiredCreateMessage(&l, now))
	}
	dryRun := req.DryRun != nil && *req.DryRun
	selects := c.o.Targets != nil && c.o.Selected != nil && l.HasSelector() && l.Enforcing(now)
	if c.off() || (dryRun && !selects) {
		return admission.Allowed("")
	}
	if l.Namespace != req.Namespace {
		// The API server sets the object's namespace to the request's: a
		// review where they differ is not its.
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard got a Lock create in namespace %q for a Lock of namespace %q", req.Namespace, l.Namespace))
	}
	if !l.Standing() {
		// It protects nothing: no delete can depend on it.
		return admission.Allowed("")
	}
	// The API server validates the Lock before admission: a review of one
	// it would not have admitted is forged, and nothing of it is kept
	// (docs/contract.md rule 17).
	if err := l.ValidateAdmitted(); err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard got a Lock create that the API server would not have admitted: %w", err))
	}
	// A selector Lock's objects to label are read before anything is
	// written: a create refused for their number writes nothing.
	var selected []lockv1alpha1.TargetKey
	if selects {
		var refused *admission.Response
		if selected, refused = c.selectedObjects(ctx, &l, now); refused != nil {
			return *refused
		}
	}
	if dryRun {
		// Answered as the create would be (its objects counted against
		// SelectorLabelCap, read only), with nothing written.
		return admission.Allowed("")
	}
	if c.o.Announcer != nil {
		if err := c.o.Announcer.AnnounceLock(ctx, &l); err != nil {
			return errored(http.StatusServiceUnavailable, fmt.Errorf("%s: %w", lockv1alpha1.CreateRefusedRetry, err))
		}
	}
	// After the announcement: the leader's reconciler keeps the label
	// while the create is pending, so it does not take it off again
	// before the Lock reaches its cache.
	if c.o.Labeler != nil {
		if err := c.o.Labeler.LabelNamespace(ctx, l.Namespace); err != nil {
			// An announced create stays marked until the peers' sweep
			// (internal/peers says why).
			return errored(http.StatusServiceUnavailable, fmt.Errorf("%s: %w", lockv1alpha1.CreateRefusedRetry, err))
		}
	}
	// Last: the target's label is kept by the reconciler only once the
	// Lock is in its cache, or for ProtectedPendingGrace.
	if c.o.Targets == nil || !l.Enforcing(now) {
		return admission.Allowed("")
	}
	if target, ok := l.StandingTarget(); ok {
		switch err := c.o.Targets.LabelTarget(ctx, target, l.Name); {
		case err == nil, apierrors.IsNotFound(err):
			// Missing: nothing to delete yet; the reconciler labels it
			// when it appears (docs/optin.md).
		default:
			return errored(http.StatusServiceUnavailable, fmt.Errorf("%s: %w", TargetLabelRefusedRetry, err))
		}
	}
	// docs/contract.md rules 15 and 21: the objects a selector Lock
	// covers, as a targetRef Lock's target.
	if err := c.labelAll(ctx, selected, l.Name); err != nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("%s: %w", TargetLabelRefusedRetry, err))
	}
	return admission.Allowed("")
}

// off reports whether no collaborator is on.
func (c *CreateHandler) off() bool {
	return c.o.Announcer == nil && c.o.Labeler == nil && c.o.Targets == nil
}

// TargetLabelRefusedRetry begins the message of a Lock create refused,
// retryably (HTTP 503), because lockguard could not put ProtectedLabel on
// its target first (TargetLabeler): lockv1alpha1.TargetLabelRefusedRetry.
const TargetLabelRefusedRetry = lockv1alpha1.TargetLabelRefusedRetry

// ExpiredCreateMessage is lockguard's refusal of the create of Lock l,
// which has expired at now (docs/contract.md rule 19).
func ExpiredCreateMessage(l *lockv1alpha1.Lock, now time.Time) string {
	return fmt.Sprintf("spec.expiresAt %s is not in the future (it is %s): a Lock that has already expired protects nothing; set a later expiresAt, or none",
		l.ExpiresAtString(), now.UTC().Format(time.RFC3339))
}
