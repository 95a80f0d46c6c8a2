package contract_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestKubectlGetLocks checks the printer columns: target kind and name,
// level, active, ready reason, expiry (empty for a Lock that never
// expires) and age, and the enforcement (Enforce, the API server's
// default), reason, selector, protected count and last denial in -o wide.
func TestKubectlGetLocks(t *testing.T) {
	ns := kube.NewNamespace(t, "printer")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	lock := kube.CreateLock(t, framework.NewLock(ns, "protect-forge-stack", "Stack", "forge", "prod"))
	kube.WaitActive(t, lock)

	r := kube.Kubectl(t, "", "get", "locks", "-n", ns, "-o", "wide", "--no-headers=false")
	if r.Code != 0 {
		t.Fatalf("kubectl get locks: exit %d: %s", r.Code, r.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get locks -o wide: got %q", r.Stdout)
	}
	if got, want := strings.Fields(lines[0]), []string{"NAME", "TARGET", "KIND", "TARGET", "LEVEL", "ACTIVE", "READY", "ENFORCEMENT", "EXPIRES", "AGE", "REASON", "SELECTOR", "PROTECTED", "LAST", "DENIED"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("headers: got %q, want %q", got, want)
	}
	f := strings.Fields(lines[1])
	// A targetRef Lock's selector cell is empty, and so is the last denial
	// of a Lock that never refused anything.
	if len(f) != 10 || f[0] != "protect-forge-stack" || f[1] != "Stack" || f[2] != "forge" || f[3] != "CanNotDelete" || f[4] != "true" || f[5] != "Active" || f[6] != "Enforce" || f[8] != "prod" || f[9] != "1" {
		t.Errorf("row: got %q, want protect-forge-stack Stack forge CanNotDelete true Active Enforce <age> prod 1", f)
	}
}

// TestAnnotationByHand removes and edits the lock annotation by hand: the
// Stack stays protected, because the webhook reads Locks, and the
// reconciler puts the annotation back. (With no reconciler running: the
// e2e suite's Test11AnnotationWithoutReconciler.)
func TestAnnotationByHand(t *testing.T) {
	ns := kube.NewNamespace(t, "byhand")
	kube.CreateObject(t, framework.StackGVK, ns, "guarded")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-guarded", "Stack", "guarded", ""))
	kube.WaitActive(t, lock)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "guarded", "keep-guarded")

	t.Run("removed", func(t *testing.T) {
		kube.RemoveAnnotation(t, framework.StackGVK, ns, "guarded")
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "guarded"), lock)
		d := framework.Eventually(t, framework.DefaultTimeout, "annotation put back", kube.AnnotationIs(framework.StackGVK, ns, "guarded", "keep-guarded"))
		t.Logf("annotation put back %s after it was removed by hand", d.Round(10*time.Millisecond))
	})
	t.Run("edited", func(t *testing.T) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"someone-else"}}}`, lockv1alpha1.LockedAnnotation)
		if err := kube.Client.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "guarded"), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "guarded"), lock)
		kube.WaitAnnotation(t, framework.StackGVK, ns, "guarded", "keep-guarded")
	})
	kube.WaitActive(t, lock)
	kube.MustExist(t, framework.StackGVK, ns, "guarded")
}
