package contract_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// TestOtherAnnotationsKept: lockguard adds and removes its annotation
// without touching the target's other annotations, whatever its cache
// keeps of them.
func TestOtherAnnotationsKept(t *testing.T) {
	ctx := t.Context()
	ns := kube.NewNamespace(t, "annotations")
	u := framework.Object(framework.StackGVK, ns, "forge")
	u.SetAnnotations(map[string]string{"team": "platform", "kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`})
	if err := kube.Client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-mine", "Stack", "forge", ""))
	kube.WaitAnnotation(t, framework.StackGVK, ns, "forge", "keep-mine")
	kube.DeleteLock(t, lock)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "forge", "")

	if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"team": "platform", "kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`}
	if diff := cmp.Diff(want, u.GetAnnotations()); diff != "" {
		t.Errorf("the target's annotations after its Lock came and went: -want, +got:\n%s", diff)
	}
}
