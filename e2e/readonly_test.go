//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// Test16ReadOnly (docs/contract.md rule 16) against the lockguard binary, as the
// chart installs it (its own ServiceAccount, the chart's update entry and
// exempt principals): a ReadOnly Lock's freeze comes into force, a
// person's spec patch is refused naming the Lock while the chart's exempt
// navique operator makes the same change, the reconciler (lockguard's own
// identity) keeps writing the target's annotation, and deleting the
// target is denied.
func Test16ReadOnly(t *testing.T) {
	ns := kube.NewNamespace(t, "readonly")
	kube.CreateObject(t, framework.StackGVK, ns, "app")
	frozen := framework.NewLock(ns, "freeze-app", "Stack", "app", "release freeze")
	frozen.Spec.Level = lockv1alpha1.LevelReadOnly
	frozen = kube.CreateLock(t, frozen)
	framework.Eventually(t, framework.DefaultTimeout, "ReadOnly InForce", func(ctx context.Context) error {
		var l lockv1alpha1.Lock
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(frozen), &l); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReadOnly); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != l.Generation {
			return fmt.Errorf("ReadOnly condition %+v", c)
		}
		return nil
	})
	kube.WaitActive(t, frozen)

	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":"large"}}`))
	person := kube.Impersonate(t, s.cfg, ns, "app", "jane@example.com")
	err := person.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "app"), patch)
	if want := webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*frozen}, "spec"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("a person's spec patch of a ReadOnly Stack: %v; want Forbidden: %s", err, want)
	}
	operator := kube.Impersonate(t, s.cfg, ns, "app", "system:serviceaccount:navique-system:navique-operator", "system:serviceaccounts")
	if err := operator.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "app"), patch); err != nil {
		t.Errorf("the exempt navique operator's spec patch: %v; want it allowed", err)
	}
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "app", client.DryRunAll), frozen)

	// A second Lock on the target: lockguard's reconciler, exempt as
	// itself, rewrites the frozen target's annotation.
	second := kube.CreateLock(t, framework.NewLock(ns, "keep-app", "Stack", "app", ""))
	kube.WaitActive(t, second)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "app", "freeze-app,keep-app")
}
