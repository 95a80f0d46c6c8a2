package contract_test

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// TestOtherAnnotationsKept: lockguard adds and removes its annotation
// without touching the target's other annotations, whatever its cache
// keeps of them.
func TestOtherAnnotationsKept(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	ns := newNamespace(t)
	u := object(stackV1alpha1, ns, "forge")
	u.SetAnnotations(map[string]string{"team": "platform", "kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`})
	u.Object["spec"] = map[string]any{"size": int64(1)}
	if err := suite.client.Create(ctx, u); err != nil {
		t.Fatal(err)
	}
	createLock(t, framework.NewLock(ns, "keep-mine", "Stack", "forge", ""))
	waitAnnotation(t, stackV1alpha1, ns, "forge", "keep-mine")
	deleteLock(t, ns, "keep-mine")
	waitAnnotation(t, stackV1alpha1, ns, "forge", "")

	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"team": "platform", "kubectl.kubernetes.io/last-applied-configuration": `{"spec":{}}`}
	if diff := cmp.Diff(want, u.GetAnnotations()); diff != "" {
		t.Errorf("the target's annotations after its Lock came and went: -want, +got:\n%s", diff)
	}
}
