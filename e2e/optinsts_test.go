//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// protectEntry is the chart's webhook entry for the DELETEs of opted-in
// kinds in namespaces holding Locks (docs/optin.md).
const protectEntry = "protect.lockguard.core.navique.com"

// Test06CascadeOptInStatefulSet (docs/contract.md rules 6 and 21, issue
// 40): StatefulSets opted in beside PVCs, each StatefulSet owning its
// claim as the StatefulSet controller makes it for a retention policy of
// WhenDeleted: Delete (set by hand: no StatefulSet controller runs here),
// with the garbage collector running. An unlocked StatefulSet's
// background delete goes through and the collector deletes its claim
// (the collector runs). A StatefulSet whose claim a Lock covers: its
// background and foreground deletes are refused up front by the protect
// entry naming the Lock and the claim, and both stay; its orphan delete
// goes through, the StatefulSet goes and the claim stays, unowned. Once
// the Lock of another such pair is deleted, the StatefulSet's delete goes
// through and the collector deletes its claim.
func Test06CascadeOptInStatefulSet(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-sts")
	ctx := t.Context()
	stsGVK := appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	pvcGVK := corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	for _, name := range []string{"web", "db", "cache"} {
		labels := map[string]string{"app": name}
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](0),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: name}}},
				},
				PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
					WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
					WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
				},
			},
		}
		if err := kube.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		pvc := newPVC(ns, "data-"+name+"-0")
		pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: s.UID}}
		if err := kube.Client.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	var locks []*lockv1alpha1.Lock
	for _, name := range []string{"db", "cache"} {
		l := framework.NewLock(ns, "keep-"+name, "PersistentVolumeClaim", "data-"+name+"-0", "production data")
		l.Spec.TargetRef.APIVersion = "v1"
		locks = append(locks, kube.CreateLock(t, l))
	}
	kube.WaitActive(t, locks...)
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)

	t.Run("collected", func(t *testing.T) {
		framework.Eventually(t, framework.DefaultTimeout, "the delete of StatefulSet web allowed", func(ctx context.Context) error {
			return kube.DeleteObject(ctx, stsGVK, ns, "web", background)
		})
		start := time.Now()
		framework.Eventually(t, gcBound, "PVC data-web-0 collected", kube.Gone(pvcGVK, ns, "data-web-0"))
		report(t, "an unlocked PVC owned by a deleted StatefulSet was collected %s after the StatefulSet's delete", time.Since(start).Round(100*time.Millisecond))
	})
	t.Run("refused", func(t *testing.T) {
		want := framework.EntryCascadeDenialError(protectEntry, locks[:1], "PersistentVolumeClaim/data-db-0")
		kube.WaitCascadeDenied(t, stsGVK, ns, "db", want)
		for _, p := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
			framework.WantError(t, string(p)+" delete of StatefulSet db", kube.DeleteObject(ctx, stsGVK, ns, "db", client.PropagationPolicy(p)), want)
		}
		kube.MustExist(t, stsGVK, ns, "db")
		kube.MustExist(t, pvcGVK, ns, "data-db-0")
	})
	t.Run("orphan", func(t *testing.T) {
		if err := kube.DeleteObject(ctx, stsGVK, ns, "db", client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
			t.Fatalf("orphan delete of StatefulSet db: %v; want it allowed", err)
		}
		framework.Eventually(t, gcBound, "StatefulSet db gone, orphaning its claim", kube.Gone(stsGVK, ns, "db"))
		var pvc corev1.PersistentVolumeClaim
		if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-db-0"}, &pvc); err != nil {
			t.Fatal(err)
		}
		if pvc.DeletionTimestamp != nil || len(pvc.OwnerReferences) > 0 {
			t.Errorf("PVC data-db-0 after its StatefulSet's orphan delete: deletionTimestamp %v, ownerReferences %v; want neither", pvc.DeletionTimestamp, pvc.OwnerReferences)
		}
	})
	t.Run("unlocked", func(t *testing.T) {
		kube.DeleteLock(t, locks[1])
		framework.Eventually(t, framework.DefaultTimeout, "the delete of StatefulSet cache allowed once its claim's Lock is deleted", func(ctx context.Context) error {
			if err := kube.DeleteObject(ctx, stsGVK, ns, "cache", background); err != nil {
				return fmt.Errorf("delete: %w", err)
			}
			return nil
		})
		framework.Eventually(t, gcBound, "PVC data-cache-0 collected", kube.Gone(pvcGVK, ns, "data-cache-0"))
	})
}
