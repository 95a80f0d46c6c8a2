package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/transport"
)

// ClusterCreatePath is where lockguard admits ClusterLock CREATEs (the
// chart's cluster-create.lockguard.core.navique.com entry, failing
// closed): the target is labelled before the create is allowed, so that a
// ClusterLock protects from its create's answer, as a Lock does
// (docs/contract.md rule 22).
const ClusterCreatePath = "/validate-cluster-lock-create"

// ClusterLabeler puts ClusterLockedLabel on the target of a ClusterLock
// being created, or on every object its selector matches.
type ClusterLabeler interface {
	// LabelClusterTarget puts labels (each "true": ClusterLockedLabel, and
	// ReadOnlyLabel for a ReadOnly ClusterLock) on the object key names,
	// with a pending mark that names by, the ClusterLock being created. A
	// NotFound error (no such object), a NoMatch error (no such kind
	// served) or ErrNamespacedTarget let the create through, the status
	// says why; a Forbidden one refuses it with the kubectl label command.
	LabelClusterTarget(ctx context.Context, key lockv1alpha1.TargetKey, labels []string, by string) error
	// ClusterSelected lists the objects s matches now
	// (readmodel.ClusterSelected), each with its GroupVersionKind.
	ClusterSelected(ctx context.Context, s *lockv1alpha1.ClusterLockSelector) ([]metav1.PartialObjectMetadata, error)
}

// ErrNamespacedTarget is LabelClusterTarget's error for a namespaced kind.
var ErrNamespacedTarget = errors.New("the kind is namespaced")

// ClusterLabel returns the ClusterLabeler that writes through w and reads
// through r with the kinds of mapper (in lockguard, the manager's client,
// its API reader and its RESTMapper): one
// merge patch of the labels and ClusterLockPendingAnnotation. When RBAC
// refuses it (a ClusterRole granting more than lockguard holds) and the
// object carries the labels already (someone who may put them there), it
// is labelled: no error.
func ClusterLabel(mapper meta.RESTMapper, w client.Writer, r client.Reader) ClusterLabeler {
	return clusterLabeler{mapper: mapper, r: r, label: func(ctx context.Context, key lockv1alpha1.TargetKey, labels []string, by string) error {
		mapping, err := mapper.RESTMapping(key.GroupKind())
		if err != nil {
			return err
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			return ErrNamespacedTarget
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(mapping.GroupVersionKind)
		obj.SetName(key.Name)
		patch := lockv1alpha1.PendingMarksPatchBy(labels, lockv1alpha1.ClusterLockPendingAnnotation, time.Now(), by)
		err = w.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
		if apierrors.IsForbidden(err) {
			got := &metav1.PartialObjectMetadata{}
			got.SetGroupVersionKind(mapping.GroupVersionKind)
			if r.Get(ctx, client.ObjectKey{Name: key.Name}, got) == nil && !slices.ContainsFunc(labels, func(l string) bool { return got.Labels[l] != "true" }) {
				return nil
			}
		}
		return err
	}}
}

// clusterLabeler is ClusterLabel's ClusterLabeler: label labels one
// object; the selected objects are read through r with the kinds of
// mapper.
type clusterLabeler struct {
	mapper meta.RESTMapper
	r      client.Reader
	label  func(ctx context.Context, key lockv1alpha1.TargetKey, labels []string, by string) error
}

func (l clusterLabeler) LabelClusterTarget(ctx context.Context, key lockv1alpha1.TargetKey, labels []string, by string) error {
	return l.label(ctx, key, labels, by)
}

func (l clusterLabeler) ClusterSelected(ctx context.Context, s *lockv1alpha1.ClusterLockSelector) ([]metav1.PartialObjectMetadata, error) {
	return readmodel.ClusterSelected(ctx, l.r, l.mapper, s)
}

// CreateHandler returns the http.Handler of ClusterCreatePath.
func (h *ClusterLockHandler) CreateHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		transport.ServeReview(h.gate, w, r, transport.DecodeReview, h.DecideCreate)
	})
}

// DecideCreate admits a ClusterLock create once its target, or every
// object its selector matches (labelSelected), carries
// ClusterLockedLabel (ClusterLockConfig.Labeler), and a ReadOnly one's
// also ReadOnlyLabel (ClusterLock.ClusterTargetLabels), so that their
// deletes, and a ReadOnly one's updates, are refused from the create's
// answer on. It refuses, dry run or not, the
// create of a ClusterLock that has already expired (ExpiredCreateMessage),
// as for a Lock. A ClusterLock that protects nothing (an invalid target),
// a dry run, and one whose target
// does not exist or whose kind is not served or namespaced (the status
// says so; the reconciler labels a target created later) are allowed
// without a label. When RBAC refuses lockguard the label, the create is
// refused with the kubectl label command to run first; any other failure
// refuses it, retryably.
func (h *ClusterLockHandler) DecideCreate(ctx context.Context, ar admission.Request) admission.Response {
	resp := h.decideCreate(ctx, ar)
	if h.finish != nil {
		h.finish.metrics.reviewed(GuardClusterCreate, resp)
	}
	return resp
}

// decideCreate is DecideCreate's answer.
func (h *ClusterLockHandler) decideCreate(ctx context.Context, ar admission.Request) admission.Response {
	if ar.Operation != admissionv1.Create || ar.Kind.Kind != "ClusterLock" || h.c.Labeler == nil {
		return admission.Allowed("")
	}
	var cl lockv1alpha1.ClusterLock
	if err := json.Unmarshal(ar.Object.Raw, &cl); err != nil {
		return errored(http.StatusBadRequest, fmt.Errorf("lockguard could not decode the ClusterLock: %w", err))
	}
	now := h.c.Now()
	if l := cl.AsLock(); l.ExpiredAt(now) {
		// docs/contract.md rule 19, as for a Lock (CreateHandler): created
		// expired, it would protect nothing while looking like it does.
		return admission.Denied(ExpiredCreateMessage(l, now))
	}
	if ar.DryRun != nil && *ar.DryRun {
		return admission.Allowed("") // nothing is written on a dry run
	}
	if !cl.Live(now) {
		return admission.Allowed("") // it protects nothing; its status says why
	}
	ctx, cancel := guardContext(ctx)
	defer cancel()
	labels := cl.ClusterTargetLabels(now)
	if s := cl.Spec.Selector; s != nil {
		return h.labelSelected(ctx, s, labels, cl.Name)
	}
	key, _ := cl.Target()
	switch err := h.c.Labeler.LabelClusterTarget(ctx, key, labels, cl.Name); {
	case err == nil, apierrors.IsNotFound(err), meta.IsNoMatchError(err), errors.Is(err, ErrNamespacedTarget):
		return admission.Allowed("")
	case apierrors.IsForbidden(err):
		return admission.Denied(ClusterCreateForbiddenMessage(key, labels...))
	default:
		return errored(http.StatusServiceUnavailable, fmt.Errorf("the ClusterLock was not created because lockguard could not label %s %s first; retry: %w", key.Kind, key.Name, err))
	}
}

// ClusterCreateForbiddenMessage is the refusal of creating a ClusterLock
// on key, whose label RBAC refuses lockguard; its kubectl label command
// puts on labels (none: ClusterLockedLabel; a ReadOnly ClusterLock's:
// ReadOnlyLabel too, ClusterLock.ClusterTargetLabels).
func ClusterCreateForbiddenMessage(key lockv1alpha1.TargetKey, labels ...string) string {
	msg := lockv1alpha1.LabelForbiddenMessage(key.GroupKind(), key.Name)
	if slices.Contains(labels, lockv1alpha1.ReadOnlyLabel) {
		locked := lockv1alpha1.ClusterLockedLabel + "=true"
		msg = strings.Replace(msg, locked+"`", locked+" "+lockv1alpha1.ReadOnlyLabel+"=true`", 1)
	}
	return msg + ", then create this ClusterLock again"
}
