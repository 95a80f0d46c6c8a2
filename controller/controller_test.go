package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func newLock(ns, name, apiVersion, kind, target string) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: target}},
	}
}

func TestValidTarget(t *testing.T) {
	cases := map[string]struct {
		reason  string
		lock    *lockv1alpha1.Lock
		wantGK  schema.GroupKind
		wantErr string
	}{
		"Default": {
			reason: "An empty apiVersion means core.navique.com/v1alpha1.",
			lock:   newLock("ns", "l", "", "Stack", "s"),
			wantGK: schema.GroupKind{Group: "core.navique.com", Kind: "Stack"},
		},
		"OtherVersion": {
			reason: "Any version of the group is valid.",
			lock:   newLock("ns", "l", "core.navique.com/v1beta1", "Stack", "s"),
			wantGK: schema.GroupKind{Group: "core.navique.com", Kind: "Stack"},
		},
		"OtherGroup": {
			reason:  "Only core.navique.com can be locked.",
			lock:    newLock("ns", "l", "apps/v1", "Deployment", "d"),
			wantGK:  schema.GroupKind{Group: "apps", Kind: "Deployment"},
			wantErr: `only core.navique.com resources can be locked, and targetRef.apiVersion "apps/v1" is in group "apps"`,
		},
		"CoreGroup": {
			reason:  "The core group (apiVersion v1) is another group.",
			lock:    newLock("ns", "l", "v1", "ConfigMap", "c"),
			wantGK:  schema.GroupKind{Kind: "ConfigMap"},
			wantErr: `only core.navique.com resources can be locked, and targetRef.apiVersion "v1" is in group ""`,
		},
		"LockOfLock": {
			reason:  "A Lock cannot lock a Lock.",
			lock:    newLock("ns", "l", "", "Lock", "other"),
			wantGK:  schema.GroupKind{Group: "core.navique.com", Kind: "Lock"},
			wantErr: "a Lock cannot protect another Lock: deleting a Lock is never blocked",
		},
		"Unparsable": {
			reason:  "An apiVersion with two slashes does not parse.",
			lock:    newLock("ns", "l", "a/b/c", "Stack", "s"),
			wantErr: `targetRef.apiVersion "a/b/c" is not a valid API version: unexpected GroupVersion string: a/b/c`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			gk, err := ValidTarget(tc.lock)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("%s\nValidTarget(...) error: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.wantGK, gk); diff != "" {
				t.Errorf("%s\nValidTarget(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestIndexLockTarget(t *testing.T) {
	deleting := newLock("ns", "l", "", "Stack", "s")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{"example.com/hold"}
	cases := map[string]struct {
		reason string
		lock   *lockv1alpha1.Lock
		want   []string
	}{
		"Live":          {reason: "A live Lock is indexed by group, kind and name, without version.", lock: newLock("ns", "l", "core.navique.com/v1beta1", "Stack", "s"), want: []string{"core.navique.com/Stack/s"}},
		"BeingDeleted":  {reason: "A Lock being deleted protects nothing.", lock: deleting},
		"InvalidTarget": {reason: "A Lock with an invalid target protects nothing.", lock: newLock("ns", "l", "apps/v1", "Deployment", "d")},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, indexLockTarget(tc.lock)); diff != "" {
				t.Errorf("%s\nindexLockTarget(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestAnnotation(t *testing.T) {
	locks := []lockv1alpha1.Lock{*newLock("ns", "zeta", "", "Stack", "s"), *newLock("ns", "alpha", "", "Stack", "s")}
	if got, want := annotationValue(locks), "alpha,zeta"; got != want {
		t.Errorf("annotationValue(...) = %q, want %q", got, want)
	}
	if got := annotationValue(nil); got != "" {
		t.Errorf("annotationValue(nil) = %q, want empty", got)
	}
	for _, tc := range []struct {
		value, name string
		want        bool
	}{
		{"alpha,zeta", "zeta", true},
		{"alpha,zeta", "alph", false},
		{"", "alpha", false},
		{"alpha", "alpha", true},
	} {
		if got := annotationLists(tc.value, tc.name); got != tc.want {
			t.Errorf("annotationLists(%q, %q) = %v, want %v", tc.value, tc.name, got, tc.want)
		}
	}
}

// TestFinder checks the lookup through the field index: the namespace, the
// group, the kind and the name must all match; the version does not matter.
func TestFinder(t *testing.T) {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&lockv1alpha1.Lock{}, TargetIndex, indexLockTarget).
		WithObjects(
			newLock("forge", "a", "", "Stack", "forge"),
			newLock("forge", "b", "core.navique.com/v1beta1", "Stack", "forge"),
			newLock("forge", "other-name", "", "Stack", "other"),
			newLock("forge", "other-kind", "", "PostgresCluster", "forge"),
			newLock("elsewhere", "other-ns", "", "Stack", "forge"),
			newLock("forge", "other-group", "apps/v1", "Stack", "forge"),
		).Build()
	f := &Finder{reader: c, synced: func() bool { return true }}
	locks, err := f.FindLocks(context.Background(), schema.GroupKind{Group: "core.navique.com", Kind: "Stack"}, types.NamespacedName{Namespace: "forge", Name: "forge"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range locks {
		names = append(names, l.Name)
	}
	if diff := cmp.Diff([]string{"a", "b"}, names); diff != "" {
		t.Errorf("FindLocks(...): -want, +got:\n%s", diff)
	}

	f.synced = func() bool { return false }
	if _, err := f.FindLocks(context.Background(), schema.GroupKind{Group: "core.navique.com", Kind: "Stack"}, types.NamespacedName{Namespace: "forge", Name: "forge"}); err != errNotSynced {
		t.Errorf("FindLocks before sync: error %v, want %v", err, errNotSynced)
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
