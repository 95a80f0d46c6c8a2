package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestProtectedLabelChange: ProtectedLabel is wanted exactly on an
// opted-in object that a live, enforcing Lock covers; a fresh pending mark
// keeps it until its grace ends; the mark goes once the Lock it names
// covers the object (a mark naming none: any Lock) or the grace is over,
// not while it names a Lock not cached yet; an object that is right gets
// no write.
func TestProtectedLabelChange(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	on, off := true, false
	label := map[string]string{lockv1alpha1.ProtectedLabel: "true", "tier": "db"}
	keep := []string{"keep"}
	markBy := func(at time.Time, by string) map[string]string {
		return map[string]string{lockv1alpha1.ProtectedPendingAnnotation: at.Format(time.RFC3339) + " " + by}
	}
	mark := func(at time.Time) map[string]string {
		return map[string]string{lockv1alpha1.ProtectedPendingAnnotation: at.Format(time.RFC3339)}
	}
	type want struct {
		Label        *bool
		ClearPending bool
		Recheck      time.Duration
	}
	cases := map[string]struct {
		reason      string
		optedIn     bool
		covered     []string // the covering Locks
		labels      map[string]string
		annotations map[string]string
		want        want
	}{
		"GroupKind":      {reason: "The group's own kinds never carry it.", covered: keep, want: want{}},
		"Wanted":         {reason: "Covered, unlabelled: the label goes on.", optedIn: true, covered: keep, want: want{Label: &on}},
		"Steady":         {reason: "Covered and labelled: no write.", optedIn: true, covered: keep, labels: label, want: want{}},
		"WrongValue":     {reason: "Covered, labelled other than true: set to true.", optedIn: true, covered: keep, labels: map[string]string{lockv1alpha1.ProtectedLabel: "x"}, want: want{Label: &on}},
		"CoveredMarked":  {reason: "The Lock reached the cache: the mark goes, the label stays.", optedIn: true, covered: keep, labels: label, annotations: mark(now), want: want{ClearPending: true}},
		"CoveredByNamed": {reason: "The Lock the mark names reached the cache: the mark goes.", optedIn: true, covered: keep, labels: label, annotations: markBy(now, "keep"), want: want{ClearPending: true}},
		"CoveredNotYet":  {reason: "Covered by an older Lock, marked by a create not cached yet: the mark stays, back when its grace ends.", optedIn: true, covered: keep, labels: label, annotations: markBy(now.Add(-10*time.Second), "newer"), want: want{Recheck: lockv1alpha1.ProtectedPendingGrace - 10*time.Second}},
		"CoveredOldMark": {reason: "A mark naming an uncached Lock whose grace is over goes.", optedIn: true, covered: keep, labels: label, annotations: markBy(now.Add(-lockv1alpha1.ProtectedPendingGrace), "newer"), want: want{ClearPending: true}},
		"Unwanted":       {reason: "No Lock covers it: the label goes.", optedIn: true, labels: label, want: want{Label: &off}},
		"UnwantedAbsent": {reason: "No Lock, no label: no write.", optedIn: true, want: want{}},
		"UnwantedValue":  {reason: "No Lock, a label of another value: it goes too (the entry selects the key).", optedIn: true, labels: map[string]string{lockv1alpha1.ProtectedLabel: "x"}, want: want{Label: &off}},
		"Pending":        {reason: "Marked 10 s ago: the create's Lock may not be cached yet; kept, back when the grace ends.", optedIn: true, labels: label, annotations: mark(now.Add(-10 * time.Second)), want: want{Recheck: lockv1alpha1.ProtectedPendingGrace - 10*time.Second}},
		"GraceOver":      {reason: "Marked longer ago than the grace: label and mark go.", optedIn: true, labels: label, annotations: mark(now.Add(-lockv1alpha1.ProtectedPendingGrace)), want: want{Label: &off, ClearPending: true}},
		"BadMark":        {reason: "A mark that is not a time keeps nothing.", optedIn: true, labels: label, annotations: map[string]string{lockv1alpha1.ProtectedPendingAnnotation: "soon"}, want: want{Label: &off, ClearPending: true}},
		"MarkNoLabel":    {reason: "A fresh mark without the label: the mark goes, no label is put on.", optedIn: true, annotations: mark(now), want: want{ClearPending: true}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, recheck := protectedLabelChange(tc.optedIn, tc.covered, tc.labels, tc.annotations, now)
			got := want{Label: c.label, ClearPending: c.clearPending, Recheck: recheck}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nprotectedLabelChange(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestMetadataPatchProtected: the protected label and the pending mark
// join the annotation's patch, and nothing else; a patch that takes
// either off is made at the resourceVersion judged (a create's label
// written since makes it fail, rather than be undone).
func TestMetadataPatchProtected(t *testing.T) {
	on, off := true, false
	cases := map[string]struct {
		reason    string
		protected protectedChange
		want      string
	}{
		"On":        {reason: "The label goes on with the annotation.", protected: protectedChange{label: &on}, want: `{"metadata":{"annotations":{"core.navique.com/locked":"a"},"labels":{"core.navique.com/protected":"true"}}}`},
		"OffMarked": {reason: "The label and the mark go.", protected: protectedChange{label: &off, clearPending: true}, want: `{"metadata":{"annotations":{"core.navique.com/locked":"a","core.navique.com/protected-pending":null},"labels":{"core.navique.com/protected":null},"resourceVersion":"7"}}`},
		"Mark":      {reason: "The mark alone goes.", protected: protectedChange{clearPending: true}, want: `{"metadata":{"annotations":{"core.navique.com/locked":"a","core.navique.com/protected-pending":null},"resourceVersion":"7"}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := metadataPatch("a", nil, tc.protected, "7").Data(nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(data)); diff != "" {
				t.Errorf("%s\nmetadataPatch(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
