package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestOddSpecs is the table of the odd but valid specs of the reconciler's
// fuzz target (controller.FuzzStatusIsTheWebhooksDecision) against the real
// API server: each Lock is refused by the CRD, or gets a status that tells
// the truth (framework.CheckLockStatusTruth: active means a dry-run DELETE
// of the target is denied).
func TestOddSpecs(t *testing.T) {
	ns := kube.NewNamespace(t, "odd")
	long := strings.Repeat("n", 253)
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	kube.CreateObject(t, framework.StackGVK, ns, long)
	cases := map[string]struct {
		reason     string
		apiVersion string
		kind       string
		target     string
		refused    bool
		active     bool
	}{
		"served":           {reason: "the plain case", kind: "Stack", target: "forge", active: true},
		"other version":    {reason: "the version is ignored", apiVersion: "core.navique.com/v1beta1", kind: "Stack", target: "forge", active: true},
		"unserved version": {reason: "a version the group does not serve is ignored too", apiVersion: "core.navique.com/v9", kind: "Stack", target: "forge", active: true},
		"longest names":    {reason: "a 253-character target", kind: "Stack", target: long, active: true},
		"lower case":       {reason: "not Kind-shaped", kind: "stack", target: "forge", refused: true},
		"resource":         {reason: "the resource, not the kind", kind: "stacks", target: "forge", refused: true},
		"plural Kind":      {reason: "Kind-shaped, not served", kind: "Stacks", target: "forge"},
		"odd case":         {reason: "Kind-shaped, not served", kind: "StAck", target: "forge"},
		"all caps":         {reason: "Kind-shaped, not served", kind: "STACK", target: "forge"},
		"cluster-scoped":   {reason: "a Region cannot be in a namespace", kind: "Region", target: "forge"},
		"other group":      {reason: "only core.navique.com", apiVersion: "apps/v1", kind: "Deployment", target: "forge"},
		"core group":       {reason: "only core.navique.com", apiVersion: "v1", kind: "ConfigMap", target: "forge"},
		"a Lock":           {reason: "Locks cannot be locked", kind: "Lock", target: "forge"},
		"a LockException":  {reason: "LockExceptions cannot be locked (rule 20)", kind: "LockException", target: "forge"},
		"not installed":    {reason: "may be installed later", kind: "Gateway", target: "forge"},
		"with digits":      {reason: "Kind-shaped, not installed", kind: "Stack2", target: "forge"},
		"longest kind":     {reason: "63 characters", kind: "S" + strings.Repeat("k", 62), target: "forge"},
		"too long kind":    {reason: "64 characters", kind: "S" + strings.Repeat("k", 63), target: "forge", refused: true},
		"dotted kind":      {reason: "a resource.group spelling", kind: "Stack.core.navique.com", target: "forge", refused: true},
	}
	i := 0
	for name, tc := range cases {
		i++
		lockName := fmt.Sprintf("odd-%d", i)
		if name == "longest names" {
			lockName = strings.Repeat("l", 253)
		}
		l := framework.NewLock(ns, lockName, tc.kind, tc.target, tc.reason)
		l.Spec.TargetRef.APIVersion = tc.apiVersion
		err := kube.Client.Create(t.Context(), l)
		switch {
		case tc.refused && !apierrors.IsInvalid(err):
			t.Errorf("%s: %s\ncreating a Lock of %+v: got %v, want Invalid", name, tc.reason, l.Spec.TargetRef, err)
		case !tc.refused && err != nil:
			t.Errorf("%s: %s\ncreating a Lock of %+v: %v", name, tc.reason, l.Spec.TargetRef, err)
		case err == nil && tc.active:
			kube.WaitActive(t, l)
		case err == nil:
			framework.Eventually(t, framework.DefaultTimeout, name+": a status", func(ctx context.Context) error {
				var got lockv1alpha1.Lock
				if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(l), &got); err != nil {
					return err
				}
				if got.Status.ObservedGeneration != got.Generation || len(got.Status.Conditions) == 0 || got.Status.Active {
					return fmt.Errorf("status %+v, want one that is not active", got.Status)
				}
				return nil
			})
		}
	}
	if err := kube.CheckLockStatusTruth(t.Context(), framework.TruthOptions{Namespaces: []string{ns}}); err != nil {
		t.Errorf("docs/contract.md rule 13:\n%v", err)
	}
}
