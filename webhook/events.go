package webhook

import (
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ReasonDeleteBlocked is the reason of the Warning Event recorded on a
// target and on its Locks (or ClusterLocks) when lockguard denies the
// target's deletion.
const ReasonDeleteBlocked = "DeleteBlocked"

// ReasonUpdateBlocked is the reason of the Warning Event recorded on an
// object and on its ReadOnly Locks (or ClusterLocks) when lockguard
// refuses its update; and on a cluster-locked object and its
// ClusterLocks when lockguard refuses an update that takes off
// ClusterLockedLabel.
const ReasonUpdateBlocked = "UpdateBlocked"

// recordRefused records through rec the Warning Events of d, the refusal
// by Locks of req, of the object name (the notes truncated by the
// handler's recorder, eventnote.Recorder): a DELETE's DeleteBlocked, an
// UPDATE's UpdateBlocked; the object and update guards' on the object and on
// each refusing Lock (the update guard's at most maxNamed), naming the
// user and the Locks; the other guards' on the Locks alone (at most
// maxNamed). A refusal by ClusterLocks is recordClusterRefused's.
func recordRefused(rec events.EventRecorder, req Request, name string, d decision) {
	if len(d.clusterLocks) > 0 {
		recordClusterRefused(rec, req, name, d)
		return
	}
	reason, action, held := blocked(req, d.guard)
	user, locks := req.UserInfo.Username, d.locks
	var related runtime.Object
	switch d.guard {
	case GuardObject, GuardReadOnly:
		locks = sortedByName(locks)
		if d.guard == GuardReadOnly {
			locks = locks[:min(len(locks), maxNamed)]
		}
		target := refusedObject(req, req.Namespace, name)
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

// recordClusterRefused is recordRefused of d, a refusal by ClusterLocks
// (the delete, label and update guards of ClusterLocks) of req, of the
// cluster-scoped object name: as the object guard's, on the object,
// naming the user and the ClusterLocks, and on each refusing ClusterLock,
// at most maxNamed of them. client-go's recorder puts the Events of
// cluster-scoped objects in the namespace default.
func recordClusterRefused(rec events.EventRecorder, req Request, name string, d decision) {
	reason, action, held := blocked(req, d.guard)
	locks := slices.Clone(d.clusterLocks)
	slices.SortFunc(locks, func(a, b lockv1alpha1.ClusterLock) int { return strings.Compare(a.Name, b.Name) })
	locks = locks[:min(len(locks), maxNamed)]
	names := make([]string, 0, len(locks))
	for _, c := range locks {
		names = append(names, c.Name)
	}
	// The review of a Namespace names it as its namespace too.
	target := refusedObject(req, "", name)
	rec.Eventf(target, nil, corev1.EventTypeWarning, reason, action,
		"%s by %s denied: %s ClusterLock(s) %s", req.Operation, req.UserInfo.Username, held, strings.Join(names, ", "))
	for i := range locks {
		rec.Eventf(&locks[i], target, corev1.EventTypeWarning, reason, action,
			"Denied the %s of %s %q by %s", req.Operation, req.Kind.Kind, name, req.UserInfo.Username)
	}
}

// blocked is the reason, action and wording of the Events of req's
// refusal by guard: a DELETE's DeleteBlocked, an UPDATE's UpdateBlocked,
// "read-only under" the update guard's Locks, "protected by" any other's
// (the ClusterLock guard refuses the UPDATE that takes its label off).
func blocked(req Request, guard string) (reason, action, held string) {
	switch {
	case req.Operation != admissionv1.Update:
		return ReasonDeleteBlocked, "Delete", "protected by"
	case guard == GuardReadOnly:
		return ReasonUpdateBlocked, "Update", "read-only under"
	}
	return ReasonUpdateBlocked, "Update", "protected by"
}

// refusedObject is the object of namespace and name that req is about, as
// the Events of its refusal regard it. kubectl describe matches Events by
// UID; without one (a review that carries none) the Event still names the
// object.
func refusedObject(req Request, namespace, name string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: metav1.GroupVersion{Group: req.Kind.Group, Version: req.Kind.Version}.String(), Kind: req.Kind.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: req.OldObject.Metadata.UID},
	}
}
