package webhook

import (
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// ReasonDeleteBlocked is the reason of the Warning Event recorded on a
// target and on its Locks when lockguard denies the target's deletion.
const ReasonDeleteBlocked = "DeleteBlocked"

// ReasonUpdateBlocked is the reason of the Warning Event recorded on an
// object and on its ReadOnly Locks when lockguard refuses its update.
const ReasonUpdateBlocked = "UpdateBlocked"

// recordRefused records through rec the Warning Events of d, the refusal
// by Locks of req, of the object name (the notes truncated by the
// handler's recorder, eventnote.Recorder): a DELETE's DeleteBlocked, an
// UPDATE's UpdateBlocked; the object and update guards' on the object and on
// each refusing Lock (the update guard's at most maxNamed), naming the
// user and the Locks; the other guards' on the Locks alone (at most
// maxNamed).
func recordRefused(rec events.EventRecorder, req Request, name string, d decision) {
	reason, action, held := ReasonDeleteBlocked, "Delete", "protected by"
	if req.Operation == admissionv1.Update {
		reason, action, held = ReasonUpdateBlocked, "Update", "read-only under"
	}
	user, locks := req.UserInfo.Username, d.locks
	var related runtime.Object
	switch d.guard {
	case GuardObject, GuardReadOnly:
		locks = sortedByName(locks)
		if d.guard == GuardReadOnly {
			locks = locks[:min(len(locks), maxNamed)]
		}
		// kubectl describe matches Events by UID; without one the Event
		// still names the object.
		target := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: metav1.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}.String(), Kind: req.Kind.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: name, UID: req.OldObject.Metadata.UID},
		}
		names := make([]string, 0, len(locks))
		for _, l := range locks {
			names = append(names, l.Name)
		}
		rec.Eventf(target, nil, corev1.EventTypeWarning, reason, action,
			"%s by %s denied: %s Lock(s) %s", req.Operation, user, held, strings.Join(names, ", "))
		related = target
	default:
		// The namespace guard never denies the delete of a terminating
		// namespace, so its Events never go into one; a Lock that denies
		// a CRD delete is live, but its namespace may have begun
		// terminating since (the namespace controller deletes Locks
		// first), in which case the API server rejects the Event and the
		// recorder drops it.
		locks = locks[:min(len(locks), maxNamed)]
	}
	for i := range locks {
		rec.Eventf(&locks[i], related, corev1.EventTypeWarning, reason, action,
			"Denied the %s of %s %q by %s", req.Operation, req.Kind.Kind, name, user)
	}
}
