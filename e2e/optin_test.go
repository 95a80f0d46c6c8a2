//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// optedIn are the resources of other groups the suite's lockguard
// protects by opt-in (docs/contract.md rule 21; local_test.go).
var optedIn = []schema.GroupResource{{Resource: "persistentvolumeclaims"}, {Resource: "secrets"}, {Group: "apps", Resource: "statefulsets"}}

// Test06CascadeOptInUnseenOwner (docs/contract.md rule 21, docs/limits.md
// "Kinds of other groups"): a locked PVC owned by a ConfigMap, a kind
// lockguard does not see: the ConfigMap's delete is not refused up front,
// but the garbage collector's delete of the PVC is, and the PVC stays.
// Once its Lock is deleted, the namespace (holding a PVC, with its
// kubernetes.io/pvc-protection finalizer) is deleted and goes.
func Test06CascadeOptInUnseenOwner(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-gc")
	ctx := t.Context()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "owner"}}
	if err := kube.Client.Create(ctx, owner); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data", OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if err := kube.Client.Create(ctx, pvc); err != nil {
		t.Fatal(err)
	}
	lock := framework.NewLock(ns, "keep-data", "PersistentVolumeClaim", "data", "production data")
	lock.Spec.TargetRef.APIVersion = "v1"
	kube.CreateLock(t, lock)
	kube.WaitActive(t, lock)
	pvcGVK := corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	kube.WaitAnnotation(t, pvcGVK, ns, "data", "keep-data")

	if err := kube.Client.Delete(ctx, owner, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("deleting the ConfigMap owning the locked PVC: %v; want it allowed (lockguard does not see ConfigMaps)", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "ConfigMap owner gone", kube.Gone(corev1.SchemeGroupVersion.WithKind("ConfigMap"), ns, "owner"))
	framework.Consistently(t, 2*blockedFor, "the locked PVC stays, its delete by the collector refused", func(ctx context.Context) error {
		// Not untouched: every PVC carries kubernetes.io/pvc-protection.
		var got corev1.PersistentVolumeClaim
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(pvc), &got); err != nil {
			return err
		}
		if got.DeletionTimestamp != nil {
			return fmt.Errorf("PVC %s/data marked for deletion at %v", ns, got.DeletionTimestamp)
		}
		return nil
	})

	kube.DeleteLock(t, lock)
	start := time.Now()
	framework.Eventually(t, framework.DefaultTimeout, "namespace "+ns+" delete allowed", func(ctx context.Context) error {
		return client.IgnoreNotFound(kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	})
	d := framework.Eventually(t, namespaceBound, "namespace "+ns+" gone", func(ctx context.Context) error {
		err := kube.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
		if err == nil {
			return context.DeadlineExceeded
		}
		return client.IgnoreNotFound(err)
	})
	report(t, "a locked PVC owned by a ConfigMap stayed %s after the ConfigMap's delete (the collector's delete refused); once its Lock was deleted, its namespace went %s after its delete (%s in all)",
		2*blockedFor, d.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
}
