package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// expiryWindow is how far ahead the expiring Lock of TestExpiry expires:
// long enough for it to turn active and for the checks before its expiry
// on a loaded machine, short enough to wait for.
const expiryWindow = 20 * time.Second

// TestExpiry (docs/contract.md rule 19): a ReadOnly Lock with expiresAt a
// few seconds ahead, the only Lock of its namespace, refuses the delete of
// its target, the namespace's delete, a person's update and says so in
// kubectl lock why, until its expiry; from then on all four are allowed
// (never before: each allowed answer is checked to come after the
// expiresAt) and why names no Lock, its status says Expired, and the reconciler takes its name
// out of the annotation and the labels off the target and the namespace.
// The expired Lock is kept, and is not written again.
func TestExpiry(t *testing.T) {
	ns := kube.NewNamespace(t, "expiry")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	lock := framework.NewLock(ns, "until-soon", "Stack", "forge", "freeze")
	lock.Spec.Level = lockv1alpha1.LevelReadOnly
	expiry := time.Now().Add(expiryWindow).Truncate(time.Second)
	lock.Spec.ExpiresAt = &metav1.Time{Time: expiry}
	kube.CreateLock(t, lock)
	kube.WaitActive(t, lock)
	waitReadOnly(t, lock, lockv1alpha1.ReasonInForce)

	person := kube.Impersonate(t, restConfig(t), ns, "forge", "jane@example.com")
	update := func(ctx context.Context) error {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"size":"s%d"}}`, time.Now().UnixNano()))
		return person.Patch(ctx, framework.Object(framework.StackGVK, ns, "forge"), patch, client.DryRunAll)
	}
	deleteStack := func(ctx context.Context) error {
		return kube.DeleteObject(ctx, framework.StackGVK, ns, "forge", client.DryRunAll)
	}
	deleteNamespace := func(ctx context.Context) error {
		return kube.Client.Delete(ctx, namespace(ns), client.DryRunAll)
	}

	t.Run("Before", func(t *testing.T) {
		kube.WantDenied(t, deleteStack(t.Context()), lock)
		kube.WantGuardDenied(t, deleteNamespace(t.Context()), webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, lock))
		wantRefused(t, update(t.Context()), webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*lock}, "spec"))
		if w := kubectlWhy(t, "stack/forge", "-n", ns); !w.Deletion.Blocked {
			t.Errorf("kubectl lock why before the expiry: not blocked (%+v)", w.Deletion)
		}
		if err := kube.AnnotationIs(framework.StackGVK, ns, "forge", lock.Name)(t.Context()); err != nil {
			t.Error(err)
		}
		if now := time.Now(); !now.Before(expiry) {
			t.Fatalf("the checks before the expiry ended at %s, after it (%s): the machine is too slow for this test's window of %s", now.Format(time.RFC3339Nano), expiry.Format(time.RFC3339), expiryWindow)
		}
	})

	// Each allowed answer must come after the expiry: one before it would
	// be a locked object changed or deleted.
	afterExpiry := func(what string, call func(context.Context) error) {
		t.Helper()
		framework.Eventually(t, expiryWindow+framework.DefaultTimeout, what+" allowed once the Lock expired", func(ctx context.Context) error {
			err := call(ctx)
			if err == nil && time.Now().Before(expiry) {
				t.Fatalf("%s allowed at %s, before the Lock's expiry %s", what, time.Now().Format(time.RFC3339Nano), expiry.Format(time.RFC3339))
			}
			if err != nil && !apierrors.IsForbidden(err) {
				t.Fatalf("%s: %v, want Forbidden before the expiry and nothing after", what, err)
			}
			return err
		})
	}
	t.Run("After", func(t *testing.T) {
		afterExpiry("deleting the Stack", deleteStack)
		afterExpiry("deleting the namespace", deleteNamespace)
		afterExpiry("the person's update", update)
		w := kubectlWhy(t, "stack/forge", "-n", ns)
		if w.Deletion.Blocked {
			t.Errorf("kubectl lock why after the expiry: blocked by %v", w.Deletion.Locks)
		}
		if len(w.Direct) != 0 || w.Update == nil || w.Update.Frozen {
			t.Errorf("kubectl lock why after the expiry: Locks %v, update %+v; want no Lock, not frozen", lockRows(w.Direct), w.Update)
		}
	})

	t.Run("Reconciled", func(t *testing.T) {
		kube.WaitLockStatus(t, lock, framework.LockStatus{Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonExpired, Message: controller.ExpiredMessage(lock)})
		kube.WaitAnnotation(t, framework.StackGVK, ns, "forge", "")
		// What mode policy waits for (docs/limits.md): the annotation is
		// the policy's only input.
		t.Logf("annotation removed by %s after the expiry", time.Since(expiry).Round(time.Millisecond))
		waitLabel(t, ns, "forge", false)
		framework.Eventually(t, framework.DefaultTimeout, "namespace label removed", namespaceLabelIs(ns, false))
		// The truth check every suite runs agrees: the expired Lock's status
		// says Expired, and no delete is denied naming it.
		if err := kube.CheckLockStatusTruth(t.Context(), framework.TruthOptions{Namespaces: []string{ns}}); err != nil {
			t.Error(err)
		}
		var kept lockv1alpha1.Lock
		if err := kube.Client.Get(t.Context(), client.ObjectKeyFromObject(lock), &kept); err != nil {
			t.Fatalf("the expired Lock: %v; want it kept", err)
		}
		// A steady cluster: the expired Lock is not written again.
		framework.Consistently(t, 2*time.Second, "the expired Lock unchanged", func(ctx context.Context) error {
			var now lockv1alpha1.Lock
			if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(lock), &now); err != nil {
				return err
			}
			if now.ResourceVersion != kept.ResourceVersion {
				return fmt.Errorf("the expired Lock was written again: resourceVersion %s, then %s (status %+v)", kept.ResourceVersion, now.ResourceVersion, now.Status)
			}
			return nil
		})
	})
	kube.DeleteOnceUnlocked(t, framework.StackGVK, ns, "forge")
}

// TestExpiredCreate (docs/contract.md rule 19): the create of a Lock whose
// expiresAt has passed is refused, saying so; one that expires later is
// created.
func TestExpiredCreate(t *testing.T) {
	ns := kube.NewNamespace(t, "expired")
	lock := framework.NewLock(ns, "too-late", "Stack", "forge", "")
	lock.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(-time.Minute).Truncate(time.Second)}
	err := kube.Client.Create(t.Context(), lock)
	want := fmt.Sprintf("spec.expiresAt %s is not in the future (it is ", lock.ExpiresAtString())
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) || !strings.HasSuffix(err.Error(), "a Lock that has already expired protects nothing; set a later expiresAt, or none") {
		t.Fatalf("creating an expired Lock: %v; want Forbidden: %s...", err, want)
	}
	later := framework.NewLock(ns, "later", "Stack", "forge", "")
	later.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(time.Hour).Truncate(time.Second)}
	kube.CreateLock(t, later)
	kube.WaitLockStatus(t, later, framework.MissingStatus(later))
}
