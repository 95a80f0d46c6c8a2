package contract_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestOptInProtectedLabel (issue 40, docs/optin.md): a targetRef Lock's
// opted-in target carries ProtectedLabel, with ProtectedPendingAnnotation,
// the moment the Lock's create returns (the create's admission put them
// on); the reconciler drops the mark once the Lock covers the target, and
// the label once no Lock does. An opted-in object no Lock covers never
// carries it.
func TestOptInProtectedLabel(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-label")
	ctx := t.Context()
	for _, name := range []string{"data", "free"} {
		if err := kube.Client.Create(ctx, newPVC(ns, name, nil)); err != nil {
			t.Fatal(err)
		}
	}
	pvc := func(ctx context.Context, name string) (*corev1.PersistentVolumeClaim, error) {
		var p corev1.PersistentVolumeClaim
		return &p, kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p)
	}
	lock := kube.CreateLock(t, optInLock(ns, "keep-data", pvcGVK, "data"))
	t.Cleanup(func() { deleteLocksFirst(t, lock) })
	got, err := pvc(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Labels[lockv1alpha1.ProtectedLabel]; v != "true" {
		t.Fatalf("right after the Lock's create, PVC data's label %s = %q, want \"true\"", lockv1alpha1.ProtectedLabel, v)
	}
	if _, ok := got.Annotations[lockv1alpha1.ProtectedPendingAnnotation]; !ok {
		t.Errorf("right after the Lock's create, PVC data has no %s annotation (labels %v)", lockv1alpha1.ProtectedPendingAnnotation, got.Labels)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the pending mark dropped, the label kept", func(ctx context.Context) error {
		got, err := pvc(ctx, "data")
		switch {
		case err != nil:
			return err
		case got.Labels[lockv1alpha1.ProtectedLabel] != "true":
			return fmt.Errorf("label %s = %q, want \"true\"", lockv1alpha1.ProtectedLabel, got.Labels[lockv1alpha1.ProtectedLabel])
		case got.Annotations[lockv1alpha1.ProtectedPendingAnnotation] != "":
			return fmt.Errorf("annotation %s still there", lockv1alpha1.ProtectedPendingAnnotation)
		}
		return nil
	})
	if got, err := pvc(ctx, "free"); err != nil || got.Labels[lockv1alpha1.ProtectedLabel] != "" {
		t.Errorf("PVC free, under no Lock: labels %v (%v), want no %s", got.Labels, err, lockv1alpha1.ProtectedLabel)
	}
	kube.DeleteLock(t, lock)
	framework.Eventually(t, framework.DefaultTimeout, "the label gone with the Lock", func(ctx context.Context) error {
		got, err := pvc(ctx, "data")
		if err != nil {
			return err
		}
		if v, ok := got.Labels[lockv1alpha1.ProtectedLabel]; ok {
			return fmt.Errorf("label %s = %q, want none", lockv1alpha1.ProtectedLabel, v)
		}
		return nil
	})
}
