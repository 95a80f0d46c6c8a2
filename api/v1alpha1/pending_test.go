package v1alpha1

import (
	"testing"
	"time"
)

// TestPendingMark: the mark PendingMarkPatch writes is the one PendingLeft
// reads; a mark whose grace is over, a missing and a malformed one leave
// nothing; PendingMarksPatchBy's mark also names its ClusterLock
// (PendingBy).
func TestPendingMark(t *testing.T) {
	at := time.Date(2026, 12, 4, 13, 0, 0, 0, time.FixedZone("CET", 3600))
	if got, want := string(PendingMarkPatch("l", "a", at)), `{"metadata":{"annotations":{"a":"2026-12-04T12:00:00Z"},"labels":{"l":"true"}}}`; got != want {
		t.Errorf("PendingMarkPatch = %s; want %s", got, want)
	}
	mark := at.UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		mark string
		now  time.Time
		want time.Duration
	}{
		{mark, at, time.Minute},
		{mark, at.Add(45 * time.Second), 15 * time.Second},
		{mark, at.Add(time.Minute), 0},
		{mark, at.Add(time.Hour), 0},
		{"", at, 0},
		{"yesterday", at, 0},
		{mark + " keep-prod", at.Add(45 * time.Second), 15 * time.Second},
	} {
		if got := PendingLeft(tc.mark, time.Minute, tc.now); got != tc.want {
			t.Errorf("PendingLeft(%q, 1m, %s) = %s; want %s", tc.mark, tc.now, got, tc.want)
		}
	}
	byMark := `{"metadata":{"annotations":{"a":"2026-12-04T12:00:00Z keep-prod"},"labels":{"l":"true","m":"true"}}}`
	if got := string(PendingMarksPatchBy([]string{"l", "m"}, "a", at, "keep-prod")); got != byMark {
		t.Errorf("PendingMarksPatchBy = %s; want %s", got, byMark)
	}
	for mark, want := range map[string]string{"2026-12-04T12:00:00Z keep-prod": "keep-prod", "2026-12-04T12:00:00Z": "", "": ""} {
		if got := PendingBy(mark); got != want {
			t.Errorf("PendingBy(%q) = %q; want %q", mark, got, want)
		}
	}
	// PendingWait: done when its Lock is cached, it names none, or its
	// grace is over; otherwise the grace left.
	cached := func(name string) bool { return name == "keep-prod" }
	for _, tc := range []struct {
		mark string
		now  time.Time
		want time.Duration
	}{
		{mark + " keep-prod", at, 0},
		{mark, at, 0},
		{mark + " newer", at.Add(45 * time.Second), 15 * time.Second},
		{mark + " newer", at.Add(time.Minute), 0},
	} {
		if got := PendingWait(tc.mark, time.Minute, tc.now, cached); got != tc.want {
			t.Errorf("PendingWait(%q, 1m, %s) = %s; want %s", tc.mark, tc.now, got, tc.want)
		}
	}
}
