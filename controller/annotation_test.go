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
	if got, want := annotationValue(locks), "alpha,zeta"; got != want {
		t.Errorf("annotationValue(...) = %q, want %q", got, want)
	}
	if got := annotationValue(nil); got != "" {
		t.Errorf("annotationValue(nil) = %q, want empty", got)
	}
}

// TestAnnotationPatch: the patch names the lock annotation only, so the
// target's other annotations are never touched.
func TestAnnotationPatch(t *testing.T) {
	for value, want := range map[string]string{
		"a,b": `{"metadata":{"annotations":{"core.navique.com/locked":"a,b"}}}`,
		"":    `{"metadata":{"annotations":{"core.navique.com/locked":null}}}`,
	} {
		data, err := annotationPatch(value).Data(nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(data)); diff != "" {
			t.Errorf("annotationPatch(%q): -want, +got:\n%s", value, diff)
		}
	}
}
