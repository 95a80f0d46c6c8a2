package v1alpha1

import (
	"encoding/json"
	"strings"
	"time"
)

// Pending marks. A label that lockguard puts on an object while admitting
// the create that needs it (ClusterLockedLabel for a ClusterLock's target,
// ProtectedLabel for an opted-in Lock target) comes with an annotation
// holding the time (ClusterLockPendingAnnotation,
// ProtectedPendingAnnotation): the reconciler keeps the label for a grace
// period even when no cached Lock asks for it yet, since the Lock whose
// create put it there may not have reached its cache.

// PendingMarkPatch is the merge patch that puts label=true on an object,
// and annotation with the time now (RFC 3339, UTC).
func PendingMarkPatch(label, annotation string, now time.Time) []byte {
	return PendingMarksPatch([]string{label}, annotation, now)
}

// PendingMarksPatch is PendingMarkPatch of several labels, each =true,
// under one annotation (a ReadOnly ClusterLock's target: ClusterLockedLabel
// and ReadOnlyLabel, ClusterLock.ClusterTargetLabels).
func PendingMarksPatch(labels []string, annotation string, now time.Time) []byte {
	return pendingPatch(labels, annotation, now.UTC().Format(time.RFC3339))
}

// PendingMarksPatchBy is PendingMarksPatch whose mark also names by, the
// object whose create puts it (a ClusterLock's name): "<time> <by>". The
// reconciler then drops the mark only once by itself is in its cache
// (PendingBy), not on seeing another of the object's ClusterLocks, which
// may be older than the create that marked it.
func PendingMarksPatchBy(labels []string, annotation string, now time.Time, by string) []byte {
	return pendingPatch(labels, annotation, now.UTC().Format(time.RFC3339)+" "+by)
}

// pendingPatch is the merge patch that puts each of labels =true and
// annotation=mark on an object.
func pendingPatch(labels []string, annotation, mark string) []byte {
	l := make(map[string]string, len(labels))
	for _, k := range labels {
		l[k] = "true"
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      l,
		"annotations": map[string]string{annotation: mark}}})
	return patch
}

// PendingLeft returns how much of grace is left at now for a pending mark
// (an annotation's value, as PendingMarkPatch or PendingMarksPatchBy
// writes it): 0 for a mark whose grace is over, and for a missing or
// malformed one.
func PendingLeft(mark string, grace time.Duration, now time.Time) time.Duration {
	at, _, _ := strings.Cut(mark, " ")
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return 0
	}
	return max(t.Add(grace).Sub(now), 0)
}

// PendingWait returns how long mark, a pending mark on an object a live
// Lock or ClusterLock covers, still has to stay: 0 once it has done its
// work, when the one whose create put it (PendingBy) is cached (cached
// says), when it names none (a mark written before marks named theirs:
// the covering one will do), or when its grace is over (a create refused
// after its admission, whose object never comes); otherwise the grace
// left. Not any covering one: it may be older than the create that marked
// the object, and without the mark the next sweep would take the label
// off that create's object before it is cached. The one rule of the
// reconciler's marks (controller: a ClusterLock's, a Lock's protected
// label).
func PendingWait(mark string, grace time.Duration, now time.Time, cached func(name string) bool) time.Duration {
	if by := PendingBy(mark); by == "" || cached(by) {
		return 0
	}
	return PendingLeft(mark, grace, now)
}

// PendingBy returns the name a mark of PendingMarksPatchBy holds; "" for
// any other.
func PendingBy(mark string) string {
	_, by, _ := strings.Cut(mark, " ")
	return by
}
