package readmodel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestCacheTransform: what the cache keeps of each object, read as a
// cached client reads it (a Meta as its DeepCopyObject).
func TestCacheTransform(t *testing.T) {
	now := metav1.Now()
	full := metav1.ObjectMeta{
		Name: "forge", Namespace: "forge", UID: "u", ResourceVersion: "7", Generation: 2, GenerateName: "f-",
		DeletionTimestamp: &now, Labels: map[string]string{"app": "x"},
		Annotations:     map[string]string{lockv1alpha1.LockedAnnotation: "a,b", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "owner", UID: "o", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		Finalizers:      []string{"f", metav1.FinalizerOrphanDependents, "example.com/g"},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "m"}},
	}
	cases := map[string]struct {
		reason string
		keys   []string // ClusterLabelKeys
		in     any
		want   any
	}{
		"Target": {
			reason: "A target keeps what the reconciler reads (name, namespace, resourceVersion, deletion, the lock annotation, the labels selector Locks match) and what the owner index reads (UID, owner references without their flags, the garbage collector's finalizers).",
			in:     &metav1.PartialObjectMetadata{ObjectMeta: *full.DeepCopy()},
			want: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				Name: "forge", Namespace: "forge", UID: "u", ResourceVersion: "7", DeletionTimestamp: &now,
				Labels:          map[string]string{"app": "x"},
				Annotations:     map[string]string{lockv1alpha1.LockedAnnotation: "a,b"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "owner", UID: "o"}},
				Finalizers:      []string{metav1.FinalizerOrphanDependents},
			}},
		},
		"UnlockedTarget": {
			reason: "A target without the lock annotation keeps no annotations.",
			in:     &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{"other": "y"}, Finalizers: []string{"f"}}},
			want:   &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x"}},
		},
		"PendingTarget": {
			reason: "A target keeps the protected-pending mark too, which the reconciler reads (controller/protectedlabel.go).",
			in: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", Labels: map[string]string{lockv1alpha1.ProtectedLabel: "true"},
				Annotations: map[string]string{lockv1alpha1.ProtectedPendingAnnotation: "2026-12-04T12:00:00Z", "other": "y"}}},
			want: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "ns", Labels: map[string]string{lockv1alpha1.ProtectedLabel: "true"},
				Annotations: map[string]string{lockv1alpha1.ProtectedPendingAnnotation: "2026-12-04T12:00:00Z"}}},
		},
		"Namespace": {
			reason: "A namespace (metadata only) keeps the has-locks label and no other.",
			in: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge",
				Labels: map[string]string{lockv1alpha1.HasLocksLabel: "true", "pod-security.kubernetes.io/enforce": "restricted"}}},
			want: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge", Labels: map[string]string{lockv1alpha1.HasLocksLabel: "true"}}},
		},
		"NamespaceSelectorLabels": {
			reason: "A namespace keeps too the labels live selector ClusterLocks read (ClusterLabelKeys), and no other.",
			keys:   []string{"tier", "team"},
			in: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge",
				Labels: map[string]string{lockv1alpha1.HasLocksLabel: "true", "tier": "prod", "pod-security.kubernetes.io/enforce": "restricted"}}},
			want: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge", Labels: map[string]string{lockv1alpha1.HasLocksLabel: "true", "tier": "prod"}}},
		},
		"ClusterScoped": {
			reason: "Any cluster-scoped object (a ClusterRole a selector ClusterLock names) keeps the labels of ClusterLabelKeys alone; none when it carries none of them.",
			keys:   []string{"tier"},
			in: &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"}, ObjectMeta: metav1.ObjectMeta{Name: "admin",
				Labels: map[string]string{"tier": "prod", "kubernetes.io/bootstrapping": "rbac-defaults", lockv1alpha1.ClusterLockedLabel: "true"}}},
			want: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "admin",
				Labels: map[string]string{"tier": "prod"}}},
		},
		"ClusterScopedNoKeptLabel": {
			reason: "A cluster-scoped object without a kept label keeps no labels.",
			keys:   []string{"tier"},
			in:     &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "view", Labels: map[string]string{"kubernetes.io/bootstrapping": "rbac-defaults"}}},
			want:   &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "view"}},
		},
		"Lock": {
			reason: "A Lock keeps its identity, deletion, spec and status.",
			in:     &lockv1alpha1.Lock{ObjectMeta: *full.DeepCopy(), Spec: lockv1alpha1.LockSpec{Reason: "r"}, Status: lockv1alpha1.LockStatus{Active: true}},
			want: &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{
				Name: "forge", Namespace: "forge", UID: "u", ResourceVersion: "7", Generation: 2, GenerateName: "f-", DeletionTimestamp: &now,
			}, Spec: lockv1alpha1.LockSpec{Reason: "r"}, Status: lockv1alpha1.LockStatus{Active: true}},
		},
		"Other": {
			reason: "Anything else loses its managedFields only.",
			in:     &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}}},
			want:   &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"a": "b"}}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			keys := &ClusterLabelKeys{}
			keys.Set(tc.keys)
			got, err := CacheTransform(keys)(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if m, ok := got.(*Meta); ok {
				// Stored as a Meta, read as the PartialObjectMetadata it
				// stands for (the kind is the informer's, not kept).
				got = m.DeepCopyObject()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nCacheTransform(%q)(...): -want, +got:\n%s", tc.reason, tc.keys, diff)
			}
		})
	}
}

// TestClusterLabelKeys: Set keeps the keys sorted and once each, and
// reports a change only when they differ; a nil or zero ClusterLabelKeys
// keeps none.
func TestClusterLabelKeys(t *testing.T) {
	var none *ClusterLabelKeys
	if got := none.Keys(); got != nil {
		t.Errorf("nil.Keys() = %q; want nil", got)
	}
	k := &ClusterLabelKeys{}
	for i, c := range []struct {
		set     []string
		changed bool
		want    []string
	}{
		{nil, false, nil},
		{[]string{"tier", "team", "tier"}, true, []string{"team", "tier"}},
		{[]string{"team", "tier"}, false, []string{"team", "tier"}},
		{[]string{"tier"}, true, []string{"tier"}},
		{nil, true, nil},
	} {
		if got := k.Set(c.set); got != c.changed {
			t.Errorf("%d: Set(%q) = %t; want %t", i, c.set, got, c.changed)
		}
		if diff := cmp.Diff(c.want, k.Keys()); diff != "" {
			t.Errorf("%d: Keys() after Set(%q): -want, +got:\n%s", i, c.set, diff)
		}
	}
}
