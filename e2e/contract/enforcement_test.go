package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
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
// The cascade, namespace and CRD guards alike: an owner's DELETE whose
// cascade reaches an object only an audit Lock covers, a namespace's
// holding one, and its kind's CRD's are allowed (dry run and real) with
// the warning of the refusal they would have got; the real one is counted
// in lockguard_would_deny_total under the guard and recorded in the Lock's
// status.lastWouldDeny.
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
	waitLastWouldDeny(t, lock, "Stack", "forge")

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

	// The cascade, namespace and CRD guards: each delete only an audit
	// Lock would refuse is allowed with the refusal as a warning, counted
	// under its guard and recorded on the Lock (the dry runs only warned).
	t.Run("cascade", func(t *testing.T) {
		ns := kube.NewNamespace(t, "audit-cascade")
		root := kube.CreateObject(t, framework.StackGVK, ns, "root")
		kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "db", root)
		lock := auditLock(t, ns, "watch-db", "PostgresCluster", "db")
		want := webhook.WouldDenyWarning(webhook.CascadeDenialMessage([]lockv1alpha1.Lock{*lock}, []string{"PostgresCluster/db"}))
		c, warnings := warningClient(t)
		// lockguard's owner index sees the ownerReference a moment after
		// the dependent's create: a dry run until the cascade is seen.
		framework.Eventually(t, framework.DefaultTimeout, "the cascade's would-deny warning on a dry-run DELETE of Stack root", func(ctx context.Context) error {
			seen := len(warnings.All())
			if err := c.Delete(ctx, framework.Object(framework.StackGVK, ns, "root"), client.DryRunAll); err != nil {
				return fmt.Errorf("a dry-run DELETE of Stack root whose cascade reaches only an audit Lock: %w, want allowed", err)
			}
			if got := warnings.All()[seen:]; !slices.Contains(got, want) {
				return fmt.Errorf("warnings %q, want %q", got, want)
			}
			return nil
		})
		wantWouldDeny(t, webhook.GuardCascade, "Stack", warnings, want, func() error { return c.Delete(ctx, framework.Object(framework.StackGVK, ns, "root")) })
		waitLastWouldDeny(t, lock, "Stack", "root")
		kube.MustExist(t, framework.PostgresClusterGVK, ns, "db")
	})
	t.Run("namespace", func(t *testing.T) {
		ns := kube.NewNamespace(t, "audit-ns")
		kube.CreateObject(t, framework.StackGVK, ns, "forge")
		lock := auditLock(t, ns, "watch", "Stack", "forge")
		framework.Eventually(t, framework.DefaultTimeout, "namespace labelled", namespaceLabelIs(ns, true))
		want := webhook.WouldDenyWarning(framework.NamespaceDenialMessage(ns, lock))
		c, warnings := warningClient(t)
		seen := len(warnings.All())
		allowedWithWarning := func(what string, err error) {
			t.Helper()
			if err != nil {
				t.Fatalf("%s under an audit Lock: %v, want allowed", what, err)
			}
			if got := warnings.All()[seen:]; !slices.Contains(got, want) {
				t.Errorf("%s: warnings %q, want %q", what, got, want)
			}
		}
		allowedWithWarning("a dry-run DELETE of the namespace", c.Delete(ctx, namespace(ns), client.DryRunAll))
		// No namespace controller runs in this suite: the namespace stays
		// terminating, and its Lock with it.
		wantWouldDeny(t, webhook.GuardNamespace, "Namespace", warnings, want, func() error { return c.Delete(ctx, namespace(ns)) })
		waitLastWouldDeny(t, lock, "Namespace", ns)
	})
	t.Run("crd", func(t *testing.T) {
		kind := "Audited" + rand.String(5)
		gvk, crd := kube.InstallKind(t, kind, nil)
		ns := kube.NewNamespace(t, "audit-crd")
		kube.CreateObject(t, gvk, ns, "w1")
		lock := auditLock(t, ns, "watch-w1", kind, "w1")
		want := webhook.WouldDenyWarning(framework.CRDDenialMessage(lock))
		c, warnings := warningClient(t)
		seen := len(warnings.All())
		if err := c.Delete(ctx, framework.CRD(crd), client.DryRunAll); err != nil {
			t.Fatalf("a dry-run DELETE of CustomResourceDefinition %s under an audit Lock: %v, want allowed", crd, err)
		}
		if got := warnings.All()[seen:]; !slices.Contains(got, want) {
			t.Errorf("a dry-run DELETE of CustomResourceDefinition %s: warnings %q, want %q", crd, got, want)
		}
		wantWouldDeny(t, webhook.GuardCRD, "CustomResourceDefinition", warnings, want, func() error { return c.Delete(ctx, framework.CRD(crd)) })
		waitLastWouldDeny(t, lock, "CustomResourceDefinition", crd)
		framework.Eventually(t, framework.DefaultTimeout, "CustomResourceDefinition "+crd+" gone", kube.Gone(framework.CRDGVK, "", crd))
	})
}

// auditLock creates the Lock name in Audit enforcement on the object
// kind/target of namespace ns, and waits until lockguard reports it live.
func auditLock(t *testing.T, ns, name, kind, target string) *lockv1alpha1.Lock {
	t.Helper()
	lock := framework.NewLock(ns, name, kind, target, "trying the Lock out")
	lock.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	kube.CreateLock(t, lock)
	kube.WaitLockStatus(t, lock, framework.AuditStatus(lock))
	return lock
}

// wantWouldDeny sends del, a real DELETE of an object of kind that only
// audit Locks would refuse, and checks that it is allowed with the warning
// want (in warnings, its client's) and counted once in
// lockguard_would_deny_total of guard (lockguard in this process).
func wantWouldDeny(t *testing.T, guard, kind string, warnings *framework.Warnings, want string, del func() error) {
	t.Helper()
	labels := map[string]string{"guard": guard, "kind": kind, "dry_run": "false"}
	before := counterSum(t, "lockguard_would_deny_total", labels)
	seen := len(warnings.All())
	if err := del(); err != nil {
		t.Fatalf("the DELETE of a %s only an audit Lock would refuse: %v, want allowed", kind, err)
	}
	if got := warnings.All()[seen:]; !slices.Contains(got, want) {
		t.Errorf("the DELETE of a %s: warnings %q, want %q", kind, got, want)
	}
	if got := counterSum(t, "lockguard_would_deny_total", labels) - before; got != 1 {
		t.Errorf("lockguard_would_deny_total%v counted %v for the DELETE of a %s, want 1", labels, got, kind)
	}
}

// waitLastWouldDeny waits until lock's status.lastWouldDeny records one
// DELETE of kind name by a user, and no lastDenied.
func waitLastWouldDeny(t *testing.T, lock *lockv1alpha1.Lock, kind, name string) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, "status.lastWouldDeny of Lock "+lock.Name, func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(lock), &got); err != nil {
			return err
		}
		w := got.Status.LastWouldDeny
		switch {
		case w == nil:
			return fmt.Errorf("no lastWouldDeny yet (status %+v)", got.Status)
		case w.Operation != "DELETE" || w.Kind != kind || w.Name != name || w.Count != 1 || w.User == "":
			return fmt.Errorf("lastWouldDeny %+v, want one DELETE of %s %s, by a user", *w, kind, name)
		case got.Status.LastDenied != nil:
			return fmt.Errorf("lastDenied %+v, want none: the Lock refused nothing", *got.Status.LastDenied)
		}
		return nil
	})
}
