package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func newLock(ns, name, apiVersion, kind, target string) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: target}},
	}
}

func TestAnnotationValue(t *testing.T) {
	locks := []lockv1alpha1.Lock{*newLock("ns", "zeta", "", "Stack", "s"), *newLock("ns", "alpha", "", "Stack", "s")}
	names := lockNames(append(locks, locks[0]))
	if got, want := annotationValue(names), "alpha,zeta"; got != want {
		t.Errorf("annotationValue(...) = %q, want %q", got, want)
	}
	if got := annotationValue(nil); got != "" {
		t.Errorf("annotationValue(nil) = %q, want empty", got)
	}
	if diff := cmp.Diff([]string{"zeta", "alpha", "zeta"}, names); diff != "" {
		t.Errorf("annotationValue(names) changed names, -want +got:\n%s", diff)
	}
}

// TestMetadataPatch: the patch names the lock annotation and, when it
// changes, the read-only label only, so the target's other annotations
// and labels are never touched.
func TestMetadataPatch(t *testing.T) {
	on, off := true, false
	cases := map[string]struct {
		reason     string
		annotation string
		label      *bool
		want       string
	}{
		"Set":        {reason: "Locks named, label left alone.", annotation: "a,b", want: `{"metadata":{"annotations":{"core.navique.com/locked":"a,b"}}}`},
		"Remove":     {reason: "No Lock: the annotation goes.", want: `{"metadata":{"annotations":{"core.navique.com/locked":null}}}`},
		"LabelOn":    {reason: "A ReadOnly Lock: the label goes on in the same patch.", annotation: "a", label: &on, want: `{"metadata":{"annotations":{"core.navique.com/locked":"a"},"labels":{"core.navique.com/read-only":"true"}}}`},
		"LabelOff":   {reason: "No ReadOnly Lock any more: the label goes.", annotation: "a", label: &off, want: `{"metadata":{"annotations":{"core.navique.com/locked":"a"},"labels":{"core.navique.com/read-only":null}}}`},
		"AllRemoved": {reason: "The last Lock, ReadOnly, deleted.", label: &off, want: `{"metadata":{"annotations":{"core.navique.com/locked":null},"labels":{"core.navique.com/read-only":null}}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			data, err := metadataPatch(tc.annotation, tc.label, protectedChange{}, "7").Data(nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, string(data)); diff != "" {
				t.Errorf("%s\nmetadataPatch(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestLabelChange(t *testing.T) {
	on, off := true, false
	cases := map[string]struct {
		reason string
		labels map[string]string
		want   bool
		change *bool
	}{
		"WantedThere":     {reason: "Wanted and there: no write.", labels: map[string]string{lockv1alpha1.ReadOnlyLabel: "true"}, want: true},
		"WantedMissing":   {reason: "Wanted, missing: on.", labels: map[string]string{"tier": "db"}, want: true, change: &on},
		"WantedWrong":     {reason: "Wanted, another value: set to true.", labels: map[string]string{lockv1alpha1.ReadOnlyLabel: "no"}, want: true, change: &on},
		"UnwantedThere":   {reason: "Not wanted, there: off.", labels: map[string]string{lockv1alpha1.ReadOnlyLabel: "true"}, change: &off},
		"UnwantedOdd":     {reason: "Not wanted, any value: off.", labels: map[string]string{lockv1alpha1.ReadOnlyLabel: ""}, change: &off},
		"UnwantedMissing": {reason: "Not wanted, missing: no write (a quiet cluster of CanNotDelete Locks writes nothing new)."},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.change, labelChange(tc.labels, tc.want)); diff != "" {
				t.Errorf("%s\nlabelChange(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
