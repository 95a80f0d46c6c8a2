package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// kindRulePath is where the CRD's CEL rule on targetRef.kind sits in a
// version: at the root of the schema (it reads the status too).
var kindRulePath = []string{"schema", "openAPIV3Schema", "x-kubernetes-validations"}

// setKindRule removes (rule nil) or puts back the CEL rule on
// targetRef.kind in the Lock CRD, and waits until the API server applies
// it: a Lock of kind "stack" is then refused (rule) or accepted (no rule,
// the probe Lock deleted again).
func setKindRule(t *testing.T, ctx context.Context, ns string, rule []any) {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := kube.Client.Get(ctx, client.ObjectKey{Name: "locks." + lockv1alpha1.Group}, crd); err != nil {
			return err
		}
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for i := range versions {
			v := versions[i].(map[string]any)
			if rule == nil {
				unstructured.RemoveNestedField(v, kindRulePath...)
			} else if err := unstructured.SetNestedSlice(v, rule, kindRulePath...); err != nil {
				return err
			}
		}
		if err := unstructured.SetNestedSlice(crd.Object, versions, "spec", "versions"); err != nil {
			return err
		}
		return kube.Client.Update(ctx, crd)
	})
	if err != nil {
		t.Fatalf("updating the Lock CRD: %v", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("the CRD's kind rule in force: %t", rule != nil), func(context.Context) error {
		probe := framework.NewLock(ns, "probe", "stack", "nothing", "")
		err := kube.Client.Create(ctx, probe)
		if err == nil {
			_ = kube.Client.Delete(ctx, probe)
		}
		switch refused := apierrors.IsInvalid(err) && strings.Contains(err.Error(), kindMessage); {
		case err != nil && !refused:
			return err
		case refused != (rule != nil):
			return fmt.Errorf("a Lock of kind stack: refused %t, want %t", refused, rule != nil)
		}
		return nil
	})
}

// kindRule returns the CRD's current rule on targetRef.kind.
func kindRule(t *testing.T) []any {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := kube.Client.Get(t.Context(), client.ObjectKey{Name: "locks." + lockv1alpha1.Group}, crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	rule, found, _ := unstructured.NestedSlice(versions[0].(map[string]any), kindRulePath...)
	if !found {
		t.Fatal("the Lock CRD has no rule on targetRef.kind")
	}
	return rule
}

// TestKindRuleUpgrade: a Lock of kind "stack" stored before the CRD
// refused that spelling (an upgrade of the CRD) still tells the truth, its
// status and spec can still be written, and it does not wedge lockguard,
// on versions with and without CRD validation ratcheting (1.30+ and 1.29:
// on 1.29 the status subresource evaluates the CRD's CEL rules on the
// whole object, so a rule on targetRef.kind alone would refuse every
// status write of such a Lock; the rule lets a Lock with a status by).
func TestKindRuleUpgrade(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "upgrade")
	kube.CreateObject(t, framework.StackGVK, ns, "old")
	rule := kindRule(t)
	setKindRule(t, t.Context(), ns, nil)
	t.Cleanup(func() { setKindRule(t, context.Background(), ns, rule) })

	legacy := kube.CreateLock(t, framework.NewLock(ns, "legacy", "stack", "old", "from before the upgrade"))
	misspelled := framework.InvalidStatus(`core.navique.com serves no kind "stack"; did you mean Stack? (targetRef cannot be changed: create a Lock of kind Stack, then delete this one)`)
	kube.WaitLockStatus(t, legacy, misspelled)
	setKindRule(t, t.Context(), ns, rule)

	// Clearing the status (as an admin might) makes lockguard write it
	// again; editing the reason makes it write the new generation's.
	if err := kube.Client.Status().Patch(t.Context(), legacy, client.RawPatch(types.MergePatchType, []byte(`{"status":{"conditions":null,"active":null}}`))); err != nil {
		t.Fatalf("Kubernetes %s: a status write of a stored Lock of kind stack under the new rule: %v", framework.Version(), err)
	}
	kube.WaitLockStatus(t, legacy, misspelled)
	if err := kube.Client.Patch(t.Context(), legacy, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"reason":"edited after the upgrade"}}`))); err != nil {
		t.Fatalf("Kubernetes %s: editing the reason of a stored Lock of kind stack under the new rule: %v", framework.Version(), err)
	}
	kube.WaitLockStatus(t, legacy, misspelled)
	if err := kube.CheckLockStatusTruth(t.Context(), framework.TruthOptions{Namespaces: []string{ns}}); err != nil {
		t.Errorf("docs/contract.md rule 13 after the upgrade:\n%v", err)
	}
	if err := kube.AnnotationIs(framework.StackGVK, ns, "old", "")(t.Context()); err != nil {
		t.Error(err)
	}
	good := kube.CreateLock(t, framework.NewLock(ns, "good", "Stack", "old", ""))
	kube.WaitActive(t, good)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "old", "good")
	kube.DeleteLock(t, legacy)
	kube.DeleteLock(t, good)
}
