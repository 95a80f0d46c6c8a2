package readmodel

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestCacheTransform: what the cache keeps of each object, read as a
// cached client reads it (a Meta or a CachedLock as its DeepCopyObject).
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
			got, err := CacheTransform(keys, nil)(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			switch m := got.(type) {
			case *Meta:
				// Stored as a Meta, read as the PartialObjectMetadata it
				// stands for (the kind is the informer's, not kept).
				got = m.DeepCopyObject()
			case *CachedLock:
				// Stored as a CachedLock, read as the Lock it stands for.
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

// TestCompactLock: the cache keeps a Lock as a CachedLock of its own that
// reads as the Lock less what CacheTransform drops, whose repeated strings
// are one copy between Locks, and whose Ready message (it names the
// Lock's target) is not shared.
func TestCompactLock(t *testing.T) {
	now := metav1.Now()
	lock := func(name string) *lockv1alpha1.Lock {
		// Every string its own copy, as decoded.
		s := func(v string) string { return string([]byte(v)) }
		return &lockv1alpha1.Lock{
			TypeMeta: metav1.TypeMeta{APIVersion: s("core.navique.com/v1alpha1"), Kind: s("Lock")},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s("forge"), UID: "u-" + types.UID(name), ResourceVersion: "7", Generation: 2, CreationTimestamp: now,
				Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"c": "d"}, Finalizers: []string{"f"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
				OwnerReferences: []metav1.OwnerReference{{Kind: "Stack", Name: "o", UID: "o"}}},
			Spec: lockv1alpha1.LockSpec{
				Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{s("tier"): s("db")}, Kinds: []string{"Stack"}},
				Level:    lockv1alpha1.LockLevel(s("ReadOnly")), Enforcement: lockv1alpha1.Enforcement(s("Audit")), Reason: s("production"), ExpiresAt: &now,
			},
			Status: lockv1alpha1.LockStatus{Scope: "selector:tier=db", Active: true, ObservedGeneration: 2,
				Conditions: []metav1.Condition{
					{Type: s("Ready"), Status: metav1.ConditionStatus(s("True")), Reason: s("Active"), Message: s("deleting ... " + name), LastTransitionTime: now},
					{Type: s("ReadOnly"), Status: metav1.ConditionStatus(s("False")), Reason: s("Audit"), Message: s("this Lock is in Audit enforcement"), LastTransitionTime: now},
				},
				Protected:  &lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: s("Stack"), Name: "db"}}},
				LastDenied: &lockv1alpha1.DeniedRequest{Time: now, User: "u", Operation: "DELETE", Kind: "Stack", Name: "db", Count: 3},
			},
		}
	}
	transform := CacheTransform(nil, nil)
	cached := map[string]*lockv1alpha1.Lock{}
	for _, name := range []string{"a", "b"} {
		in := lock(name)
		got, err := transform(in)
		if err != nil {
			t.Fatal(err)
		}
		want := lock(name)
		want.Labels, want.Annotations, want.Finalizers, want.ManagedFields, want.OwnerReferences = nil, nil, nil, nil, nil
		c, ok := got.(*CachedLock)
		if !ok {
			t.Fatalf("the cached Lock %s is a %T, want a *CachedLock", name, got)
		}
		if diff := cmp.Diff(want, c.Lock()); diff != "" {
			t.Fatalf("the cached Lock %s: -want, +got:\n%s", name, diff)
		}
		cached[name] = c.Lock()
	}
	a, b := cached["a"], cached["b"]
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	for what, pair := range map[string][2]string{
		"apiVersion":       {a.APIVersion, b.APIVersion},
		"namespace":        {a.Namespace, b.Namespace},
		"level":            {string(a.Spec.Level), string(b.Spec.Level)},
		"enforcement":      {string(a.Spec.Enforcement), string(b.Spec.Enforcement)},
		"reason":           {a.Spec.Reason, b.Spec.Reason},
		"selector label":   {a.Spec.Selector.MatchLabels["tier"], b.Spec.Selector.MatchLabels["tier"]},
		"condition type":   {a.Status.Conditions[0].Type, b.Status.Conditions[0].Type},
		"condition status": {string(a.Status.Conditions[0].Status), string(b.Status.Conditions[0].Status)},
		"condition reason": {a.Status.Conditions[1].Reason, b.Status.Conditions[1].Reason},
		"ReadOnly message": {a.Status.Conditions[1].Message, b.Status.Conditions[1].Message},
		"protected's kind": {a.Status.Protected.Resources[0].Kind, b.Status.Protected.Resources[0].Kind},
	} {
		if !same(pair[0], pair[1]) {
			t.Errorf("the two cached Locks' %s %q are two copies, want one", what, pair[0])
		}
	}
}
