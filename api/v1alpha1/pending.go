package v1alpha1

import (
	"encoding/json"
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
	l := make(map[string]string, len(labels))
	for _, k := range labels {
		l[k] = "true"
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      l,
		"annotations": map[string]string{annotation: now.UTC().Format(time.RFC3339)}}})
	return patch
}

// PendingLeft returns how much of grace is left at now for a pending mark
// (an annotation's value, as PendingMarkPatch writes it): 0 for a mark
// whose grace is over, and for a missing or malformed one.
func PendingLeft(mark string, grace time.Duration, now time.Time) time.Duration {
	at, err := time.Parse(time.RFC3339, mark)
	if err != nil {
		return 0
	}
	return max(at.Add(grace).Sub(now), 0)
}
