//go:build e2e

package chart_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// guardOffMessage is the message of a GuardDisabled ReadOnly condition
// (controller/status.go).
const guardOffMessage = "lockguard runs without its update guard (the chart's mode policy or guards.readOnly.enabled=false: --read-only-guard=false): " +
	"updates of the resources this Lock covers are not refused; deleting them is still denied"

// testPolicyReadOnly (docs/contract.md rules 13 and 16, issue 40), after
// testPolicy installed the chart's policy: the chart's mode policy renders
// no webhook, so no update guard, and tells lockguard so
// (--read-only-guard=false); lockguard, run in-process as that Deployment
// would run it, then reports a ReadOnly Lock's freeze GuardDisabled, never
// InForce. And that is the truth on the API server: a spec change of the
// Lock's target goes through, while its delete is denied (by the policy,
// from the annotation lockguard keeps).
func testPolicyReadOnly(ctx context.Context, t *testing.T, env *framework.Env, kubeVersion string, apiVersions []string) {
	objs, err := framework.Render(ctx, framework.Release{Name: "lockguard", Namespace: "lockguard-system",
		KubeVersion: kubeVersion, APIVersions: apiVersions, Set: []string{"mode=policy"}})
	if err != nil {
		t.Fatal(err)
	}
	if vwc := framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard"); vwc != nil {
		t.Fatal("mode=policy rendered a ValidatingWebhookConfiguration")
	}
	args := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard")).Spec.Template.Spec.Containers[0].Args
	guardOff := slices.Contains(args, "--read-only-guard=false")
	if !guardOff {
		t.Errorf("mode=policy renders no update entry, but the Deployment does not pass --read-only-guard=false: %v", args)
	}
	if !slices.Contains(args, "--cluster-lock-guard=false") {
		t.Errorf("mode=policy renders no ClusterLock entry, but the Deployment does not pass --cluster-lock-guard=false: %v", args)
	}
	mgr, err := env.StartManager(framework.ManagerOptions{DisableReadOnlyGuard: guardOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := mgr.Stop(); err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	kube, err := env.Kube("policy-")
	if err != nil {
		t.Fatal(err)
	}
	ns := kube.NewNamespace(t, "readonly")
	kube.CreateObject(t, framework.StackGVK, ns, "db")
	lock := framework.NewLock(ns, "freeze", "Stack", "db", "")
	lock.Spec.Level = lockv1alpha1.LevelReadOnly
	lock = kube.CreateLock(t, lock)
	kube.WaitActive(t, lock)
	framework.Eventually(t, framework.DefaultTimeout, "ReadOnly GuardDisabled", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(lock), &got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReadOnly)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != lockv1alpha1.ReasonGuardDisabled || c.Message != guardOffMessage {
			return fmt.Errorf("ReadOnly condition %+v; want False, %s: %s", c, lockv1alpha1.ReasonGuardDisabled, guardOffMessage)
		}
		return nil
	})

	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":"large"}}`))
	if err := kube.Client.Patch(ctx, framework.Object(framework.StackGVK, ns, "db"), patch); err != nil {
		t.Errorf("a spec change of the Stack a ReadOnly Lock covers, in mode policy: %v; want it allowed, as the Lock's GuardDisabled says", err)
	}
	const want = "resource is protected by Lock(s) [freeze]; delete the Lock(s) before deleting this resource"
	framework.Eventually(t, framework.DefaultTimeout, "the policy denies the delete", func(ctx context.Context) error {
		err := kube.Client.Delete(ctx, framework.Object(framework.StackGVK, ns, "db"), client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("dry-run DELETE: %v; want Forbidden with %q", err, want)
		}
		return nil
	})
}
