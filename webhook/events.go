package webhook

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ReasonDeleteBlocked is the reason of the Warning Event recorded on a
// target and on its Locks when lockguard denies the target's deletion.
const ReasonDeleteBlocked = "DeleteBlocked"

// recordDenial records a DeleteBlocked Warning Event on the target and on
// each Lock that protects it, naming the user and the Locks (the notes
// truncated by the handler's recorder, eventnote.Recorder). It reads the
// target's UID from oldObject (kubectl describe matches Events by UID);
// without one the Event still names the object.
func (h *Handler) recordDenial(req Request, locks []lockv1alpha1.Lock) {
	name := targetName(req)
	target := &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: metav1.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}.String(), Kind: req.Kind.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: name, UID: req.OldObject.Metadata.UID},
	}
	locks = sortedByName(locks)
	names := make([]string, 0, len(locks))
	for _, l := range locks {
		names = append(names, l.Name)
	}
	user := req.UserInfo.Username
	h.events.Eventf(target, nil, corev1.EventTypeWarning, ReasonDeleteBlocked, "Delete",
		"DELETE by %s denied: protected by Lock(s) %s", user, strings.Join(names, ", "))
	h.recordOnLocks(req, locks, target)
}

// recordOnLocks records a DeleteBlocked Warning Event on each of locks for
// the denied req, related to the object being deleted when it is given.
func (h *Handler) recordOnLocks(req Request, locks []lockv1alpha1.Lock, related *metav1.PartialObjectMetadata) {
	for i := range locks {
		var rel runtime.Object
		if related != nil {
			rel = related
		}
		h.events.Eventf(&locks[i], rel, corev1.EventTypeWarning, ReasonDeleteBlocked, "Delete",
			"Denied the DELETE of %s %q by %s", req.Kind.Kind, targetName(req), req.UserInfo.Username)
	}
}
