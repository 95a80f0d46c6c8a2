package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestCRDGuard (rule 12): deleting the CRD of a kind while a Lock protects
// an existing object of it is denied, by name and by deletecollection, dry
// run or not; the object and the CRD stay. Once the Lock is gone the CRD
// is deleted.
func TestCRDGuard(t *testing.T) {
	kind := "Widget" + rand.String(5)
	id := rand.String(8)
	widget, crd := kube.InstallKind(t, kind, map[string]string{"lockguard-test": id})
	ns := kube.NewNamespace(t, "crdguard")
	kube.CreateObject(t, widget, ns, "w1")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-widget", kind, "w1", "the only copy"))
	// A Lock on a missing object of the kind does not hold the CRD back,
	// nor is it named.
	kube.CreateLock(t, framework.NewLock(ns, "keep-nothing", kind, "absent", ""))
	kube.WaitActive(t, lock)

	want := framework.CRDDenialMessage(lock)
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), framework.CRD(crd), client.DryRunAll), webhook.GuardCRD, want)
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), framework.CRD(crd)), webhook.GuardCRD, want)
	kube.WantGuardDenied(t, kube.Client.DeleteAllOf(t.Context(), framework.CRD(""), client.MatchingLabels{"lockguard-test": id}), webhook.GuardCRD, want)
	kube.MustExist(t, framework.CRDGVK, "", crd)
	kube.MustExist(t, widget, ns, "w1")

	kube.DeleteLock(t, lock)
	kube.DeleteOnceUnguarded(t, framework.CRD(crd), client.DryRunAll)
	c, warnings := kube.Client, (*framework.Warnings)(nil)
	if suite.env != nil {
		c, warnings = warningClient(t)
	}
	if err := c.Delete(t.Context(), framework.CRD(crd)); err != nil {
		t.Fatalf("deleting CustomResourceDefinition %s once unlocked: %v", crd, err)
	}
	// Rule 14: the Lock left on a missing Widget is named in a warning.
	want = fmt.Sprintf("Lock(s) [%s/keep-nothing] target %s objects that do not exist: they protect nothing", ns, kind)
	if got := warnings.All(); warnings != nil && (len(got) != 1 || got[0] != want) {
		t.Fatalf("warnings %q; want [%q]", got, want)
	}
	framework.Eventually(t, framework.DefaultTimeout, "CustomResourceDefinition "+crd+" gone", kube.Gone(framework.CRDGVK, "", crd))
}

// TestLockCRDGuard (rule 12): the Lock CRD cannot be deleted while a live
// Lock exists, dry run or not. Only dry runs are sent, so that the suite's
// Locks survive a regression.
func TestLockCRDGuard(t *testing.T) {
	ns := kube.NewNamespace(t, "lockcrd")
	lock := kube.CreateLock(t, framework.NewLock(ns, "any", "Stack", "absent", ""))
	err := kube.Client.Delete(t.Context(), framework.CRD("locks."+lockv1alpha1.Group), client.DryRunAll)
	prefix := `admission webhook "` + kube.GuardWebhookName(webhook.GuardCRD) + `" denied the request: customresourcedefinition is protected by Lock(s) [`
	if err == nil || !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), prefix) ||
		!strings.HasSuffix(err.Error(), "; deleting the Lock CustomResourceDefinition would delete every Lock") {
		t.Fatalf("dry-run delete of the Lock CRD: got %v, want it denied by the live Locks", err)
	}
	kube.MustExist(t, framework.CRDGVK, "", "locks."+lockv1alpha1.Group)
	var l lockv1alpha1.Lock
	if err := kube.Client.Get(context.Background(), client.ObjectKeyFromObject(lock), &l); err != nil {
		t.Fatalf("the Lock is gone after a denied dry-run delete of its CRD: %v", err)
	}
}

// TestCRDGuardSeesOnlyItsGroup (rule 12): the API server sends lockguard
// the delete of a core.navique.com CRD, and never that of another group's
// CRD (the webhook entry's matchCondition), as lockguard's own count of
// CRD decisions shows.
func TestCRDGuardSeesOnlyItsGroup(t *testing.T) {
	inProcess(t)
	other := otherGroupCRD(t)
	before := crdReviews(t)
	if err := kube.Client.Delete(t.Context(), framework.CRD(other)); err != nil {
		t.Fatalf("deleting CustomResourceDefinition %s of another group: %v", other, err)
	}
	if got := crdReviews(t); got != before {
		t.Fatalf("lockguard answered %v CRD reviews for a CRD of another group, want none", got-before)
	}
	_, ours := kube.InstallKind(t, "Gizmo"+rand.String(5), nil)
	if err := kube.Client.Delete(t.Context(), framework.CRD(ours)); err != nil {
		t.Fatalf("deleting the unlocked CustomResourceDefinition %s: %v", ours, err)
	}
	if got := crdReviews(t); got != before+1 {
		t.Fatalf("lockguard answered %v CRD reviews for one delete of a core.navique.com CRD, want 1", got-before)
	}
}

// otherGroupCRD creates a CRD of group guardtest.example.com and returns
// its name.
func otherGroupCRD(t *testing.T) string {
	t.Helper()
	kind := "Other" + rand.String(5)
	plural := strings.ToLower(kind) + "s"
	crd := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"group": "guardtest.example.com",
		"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
		"scope": "Namespaced",
		"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object"}}}},
	}}}
	crd.SetGroupVersionKind(framework.CRDGVK)
	crd.SetName(plural + ".guardtest.example.com")
	if err := kube.Client.Create(t.Context(), crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), framework.CRD(crd.GetName())) })
	return crd.GetName()
}

// crdReviews is the number of CRD deletes lockguard (in this process) has
// answered.
func crdReviews(t *testing.T) float64 {
	t.Helper()
	return counterSum(t, "lockguard_admission_reviews_total", map[string]string{"guard": webhook.GuardCRD})
}
