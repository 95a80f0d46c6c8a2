package contract_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestOptInProtectedLabel (issue 40, docs/optin.md): a targetRef Lock's
// opted-in target carries ProtectedLabel the moment the Lock's create
// returns, put on by the create's admission in one write with
// ProtectedPendingAnnotation (seen by a watch: the mark may be gone by a
// read right after the create); the reconciler drops the mark once the Lock covers the target, and
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
	// The reconciler may drop the mark before a read right after the
	// create (once the Lock is in its cache): the write that put the label
	// on, seen by a watch from before the create, must carry both.
	before, err := pvc(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(restConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	w, err := cs.CoreV1().PersistentVolumeClaims(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=data", ResourceVersion: before.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	lock := kube.CreateLock(t, optInLock(ns, "keep-data", pvcGVK, "data"))
	t.Cleanup(func() { deleteLocksFirst(t, lock) })
	got, err := pvc(ctx, "data")
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Labels[lockv1alpha1.ProtectedLabel]; v != "true" {
		t.Fatalf("right after the Lock's create, PVC data's label %s = %q, want \"true\"", lockv1alpha1.ProtectedLabel, v)
	}
	labelled := labelledBy(t, w.ResultChan(), got.ResourceVersion)
	if _, ok := labelled.Annotations[lockv1alpha1.ProtectedPendingAnnotation]; !ok {
		t.Errorf("the write that labelled PVC data %s (resourceVersion %s) has no %s annotation (annotations %v)", lockv1alpha1.ProtectedLabel, labelled.ResourceVersion, lockv1alpha1.ProtectedPendingAnnotation, labelled.Annotations)
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

// labelledBy returns the first PVC of events that carries ProtectedLabel:
// the write that put it on. It fails the test if events end, or pass
// resourceVersion upTo (a read that already showed the label), without
// one.
func labelledBy(t *testing.T, events <-chan watch.Event, upTo string) *corev1.PersistentVolumeClaim {
	t.Helper()
	timeout := time.After(framework.DefaultTimeout)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the PVC's watch ended before the write that labelled it")
			}
			p, isPVC := ev.Object.(*corev1.PersistentVolumeClaim)
			if !isPVC {
				t.Fatalf("the PVC's watch: %s %T", ev.Type, ev.Object)
			}
			if p.Labels[lockv1alpha1.ProtectedLabel] == "true" {
				return p
			}
			if p.ResourceVersion == upTo {
				t.Fatalf("the PVC's watch reached resourceVersion %s, which carries the label, without a write carrying it", upTo)
			}
		case <-timeout:
			t.Fatal("no write of the PVC carrying the label within the timeout")
		}
	}
}
