package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// The create of a selector ClusterLock (docs/contract.md rule 22,
// docs/clusterlock.md): every object its selector matches is labelled
// before the create is allowed, as a targetRef ClusterLock's target is,
// so that it protects them from its create's answer. The objects that
// start matching later are labelled by the reconciler.

// clusterLabelWorkers is how many labels a selector ClusterLock's create
// writes at once: enough that MaxClusterSelected fit in guardTimeout on
// an API server answering in a few milliseconds, few enough not to flood
// it.
const clusterLabelWorkers = 8

// labelSelected labels every object s matches now
// (ClusterLabeler.ClusterSelected), each with a pending mark naming by
// (the ClusterLock being created), and allows
// the create once all are. It refuses the create when s matches more than
// lockv1alpha1.MaxClusterSelected objects (ClusterSelectTooManyMessage),
// and when RBAC refuses lockguard one label (ClusterCreateForbiddenMessage,
// naming it); any other failure refuses it retryably. An object deleted
// meanwhile is skipped.
func (h *ClusterLockHandler) labelSelected(ctx context.Context, s *lockv1alpha1.ClusterLockSelector, labels []string, by string) admission.Response {
	objs, err := h.c.Labeler.ClusterSelected(ctx, s)
	if err != nil {
		return errored(http.StatusServiceUnavailable, fmt.Errorf("the ClusterLock was not created because lockguard could not list what its selector matches; retry: %w", err))
	}
	if len(objs) > lockv1alpha1.MaxClusterSelected {
		return admission.Denied(ClusterSelectTooManyMessage(s, len(objs)))
	}
	keys := make([]lockv1alpha1.TargetKey, 0, len(objs))
	for i := range objs {
		keys = append(keys, selectedKey(&objs[i]))
	}
	var (
		forbidden *lockv1alpha1.TargetKey
		failed    error
	)
	for _, f := range labelEach(keys, clusterLabelWorkers, func(key lockv1alpha1.TargetKey) error {
		return h.c.Labeler.LabelClusterTarget(ctx, key, labels, by)
	}) {
		switch {
		case !apierrors.IsForbidden(f.err):
			failed = errors.Join(failed, fmt.Errorf("%s %s: %w", f.key.Kind, f.key.Name, f.err))
		case forbidden == nil:
			forbidden = &f.key
		}
	}
	switch {
	case forbidden != nil:
		return admission.Denied(ClusterCreateForbiddenMessage(*forbidden, labels...))
	case failed != nil:
		return errored(http.StatusServiceUnavailable, fmt.Errorf("the ClusterLock was not created because lockguard could not label what its selector matches first; retry: %w", failed))
	}
	return admission.Allowed("")
}

// selectedKey is the key of o, an object ClusterSelected listed.
func selectedKey(o *metav1.PartialObjectMetadata) lockv1alpha1.TargetKey {
	gvk := o.GroupVersionKind()
	return lockv1alpha1.TargetKey{Group: gvk.Group, Kind: gvk.Kind, Name: o.Name}
}

// ClusterSelectTooManyMessage is the refusal of creating a ClusterLock
// whose selector s matches n objects, more than
// lockv1alpha1.MaxClusterSelected.
func ClusterSelectTooManyMessage(s *lockv1alpha1.ClusterLockSelector, n int) string {
	return fmt.Sprintf("the selector %s matches %d objects, more than the %d that lockguard labels at a ClusterLock's create; narrow the selector (more labels, or fewer kinds) or split it into several ClusterLocks",
		s, n, lockv1alpha1.MaxClusterSelected)
}
