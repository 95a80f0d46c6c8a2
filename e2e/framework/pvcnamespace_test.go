package framework_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/navique/lockguard/e2e/framework"
)

// TestNamespaceWithPVCGoes checks that the controller manager removes the
// kubernetes.io/pvc-protection finalizer the API server puts on every
// PersistentVolumeClaim: a namespace holding a PVC is gone within a
// minute of its delete, rather than Terminating for good.
func TestNamespaceWithPVCGoes(t *testing.T) {
	env := framework.StartForTest(t, framework.Options{ControllerManager: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := "pvc-goes"
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc, err := cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("PVC finalizers at create: %v", pvc.Finalizers)
	if err := cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	framework.Eventually(t, time.Minute, "namespace "+ns+" gone", func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return context.DeadlineExceeded
		}
		return err
	})
	t.Logf("namespace with a PVC gone %s after its delete", time.Since(start).Round(100*time.Millisecond))
}
