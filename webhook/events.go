package webhook

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ReasonDeleteBlocked is the reason of the Warning Event recorded on a
// target and on its Locks when lockguard denies the target's deletion.
const ReasonDeleteBlocked = "DeleteBlocked"

// recordDenial records through rec the DeleteBlocked Warning Events of d,
// a denial of req: the object guard's on the target and on each Lock that
// protects it (recordOnTarget), the other guards' on the Locks alone
// (recordOnLocks).
func recordDenial(rec events.EventRecorder, req Request, d decision) {
	name := targetName(req)
	if d.guard == GuardObject {
		recordOnTarget(rec, req, name, d.locks)
		return
	}
	// The namespace guard never denies the delete of a terminating
	// namespace, so its Events never go into one; a Lock that denies a CRD
	// delete is live, but its namespace may have begun terminating since
	// (the namespace controller deletes Locks first), in which case the API
	// server rejects the Event and the recorder drops it.
	recordOnLocks(rec, req, name, d.locks[:min(len(d.locks), maxNamed)], nil)
}

// recordOnTarget records a DeleteBlocked Warning Event on the target, the
// object name that req deletes, and on each Lock that protects it, naming the user and the Locks (the notes
// truncated by the handler's recorder, eventnote.Recorder). It reads the
// target's UID from oldObject (kubectl describe matches Events by UID);
// without one the Event still names the object.
func recordOnTarget(rec events.EventRecorder, req Request, name string, locks []lockv1alpha1.Lock) {
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
	rec.Eventf(target, nil, corev1.EventTypeWarning, ReasonDeleteBlocked, "Delete",
		"DELETE by %s denied: protected by Lock(s) %s", user, strings.Join(names, ", "))
	recordOnLocks(rec, req, name, locks, target)
}

// recordOnLocks records a DeleteBlocked Warning Event on each of locks for
// the denied req of the object name, related to that object when it is
// given.
func recordOnLocks(rec events.EventRecorder, req Request, name string, locks []lockv1alpha1.Lock, related *metav1.PartialObjectMetadata) {
	for i := range locks {
		var rel runtime.Object
		if related != nil {
			rel = related
		}
		rec.Eventf(&locks[i], rel, corev1.EventTypeWarning, ReasonDeleteBlocked, "Delete",
			"Denied the DELETE of %s %q by %s", req.Kind.Kind, name, req.UserInfo.Username)
	}
}
