package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestAuditEnforcement (docs/contract.md rule 20): a Lock in Audit
// enforcement on a Stack refuses nothing: the Stack's DELETE (dry run and
// real) and its namespace's dry-run DELETE are allowed, the DELETE with
// the warning that says the refusal it would have got; the real one is
// recorded in the Lock's status.lastWouldDeny; the Stack carries no
// locked annotation (what policy mode denies from); the Lock's status says
// Ready True, reason Audit, not active, and kubectl lock list says Audit.
// Switched to Enforce (free), the delete is refused and the annotation
// names the Lock; switched back to Audit by a user without the verb
// unlock, refused (rule 18); with it, allowed, and the annotation goes.
func TestAuditEnforcement(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	ns := kube.NewNamespace(t, "audit")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	lock := framework.NewLock(ns, "try-first", "Stack", "forge", "trying the Lock out")
	lock.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	kube.CreateLock(t, lock)
	kube.WaitLockStatus(t, lock, framework.AuditStatus(lock))
	// The status is written after the annotation, in the same pass.
	if err := kube.AnnotationIs(framework.StackGVK, ns, "forge", "")(ctx); err != nil {
		t.Error(err)
	}
	if err := kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: []string{ns}}); err != nil {
		t.Error(err)
	}
	if r := kubectlLock(t, "", "list", "-n", ns); r.err != nil || !strings.Contains(r.stdout, "Audit") {
		t.Errorf("kubectl lock list: %v\n%s\nwant the Lock's status Audit", r.err, r.stdout)
	}

	wantWarning := webhook.WouldDenyWarning(framework.DenialMessage(lock))
	c, warnings := warningClient(t)
	allowedWithWarning := func(what string, seen int, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s under an audit Lock: %v, want allowed", what, err)
		}
		if got := warnings.All()[seen:]; !slices.Contains(got, wantWarning) {
			t.Errorf("%s: warnings %q, want %q", what, got, wantWarning)
		}
	}
	seen := len(warnings.All())
	allowedWithWarning("a dry-run DELETE of the Stack", seen, c.Delete(ctx, framework.Object(framework.StackGVK, ns, "forge"), client.DryRunAll))
	if err := c.Delete(ctx, namespace(ns), client.DryRunAll); err != nil {
		t.Errorf("a dry-run DELETE of the namespace under an audit Lock only: %v, want allowed", err)
	}
	seen = len(warnings.All())
	allowedWithWarning("the DELETE of the Stack", seen, c.Delete(ctx, framework.Object(framework.StackGVK, ns, "forge")))
	framework.Eventually(t, framework.DefaultTimeout, "status.lastWouldDeny", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(lock), &got); err != nil {
			return err
		}
		w := got.Status.LastWouldDeny
		switch {
		case w == nil:
			return fmt.Errorf("no lastWouldDeny yet (status %+v)", got.Status)
		case w.Operation != "DELETE" || w.Kind != "Stack" || w.Name != "forge" || w.Count != 1 || w.User == "":
			return fmt.Errorf("lastWouldDeny %+v, want one DELETE of Stack forge, by a user", *w)
		case got.Status.LastDenied != nil:
			return fmt.Errorf("lastDenied %+v, want none: the Lock refused nothing", *got.Status.LastDenied)
		}
		return nil
	})

	// Enforce: the same Lock protects the Stack, created again.
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	enforcement := func(e lockv1alpha1.Enforcement) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"enforcement":%q}}`, e))
	}
	editor := kube.EditUser(t, suite.env.Config, ns, "audit-editor", &lockv1alpha1.LockList{})
	if err := editor.Patch(ctx, lock.DeepCopy(), enforcement(lockv1alpha1.EnforcementEnforce)); err != nil {
		t.Fatalf("an edit user switching an audit Lock to Enforce: %v", err)
	}
	lock.Spec.Enforcement = lockv1alpha1.EnforcementEnforce
	kube.WaitActive(t, lock)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "forge", lock.Name)
	kube.WantDenied(t, kube.DeleteObject(ctx, framework.StackGVK, ns, "forge", client.DryRunAll), lock)

	// Back to Audit: it lowers the Lock (rule 18).
	err := editor.Patch(ctx, lock.DeepCopy(), enforcement(lockv1alpha1.EnforcementAudit))
	if want := lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredEnforcement, ns, lock.Name); err == nil || !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), want) {
		t.Errorf("an edit user switching a Lock to Audit: %v\nwant forbidden, ending with %q", err, want)
	}
	if err := kube.Client.Patch(ctx, lock.DeepCopy(), enforcement(lockv1alpha1.EnforcementAudit)); err != nil {
		t.Fatalf("an admin switching a Lock to Audit: %v", err)
	}
	lock.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	kube.WaitLockStatus(t, lock, framework.AuditStatus(lock))
	kube.WaitAnnotation(t, framework.StackGVK, ns, "forge", "")
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns, "forge", client.DryRunAll); err != nil {
		t.Errorf("a dry-run DELETE of the Stack once its Lock is back in Audit: %v, want allowed", err)
	}
}
