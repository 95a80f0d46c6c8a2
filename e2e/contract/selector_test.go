package contract_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// createLabelledStack creates Stack name in ns with labels.
func createLabelledStack(t *testing.T, ns, name string, labels map[string]string) {
	t.Helper()
	u := framework.Object(framework.StackGVK, ns, name)
	u.SetLabels(labels)
	if err := kube.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating Stack %s/%s: %v", ns, name, err)
	}
}

// relabel sets the label tier of Stack ns/name to value ("" removes it).
func relabel(t *testing.T, ns, name, value string) {
	t.Helper()
	patch := `{"metadata":{"labels":{"tier":null}}}`
	if value != "" {
		patch = `{"metadata":{"labels":{"tier":"` + value + `"}}}`
	}
	if err := kube.Client.Patch(t.Context(), framework.Object(framework.StackGVK, ns, name), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatalf("relabelling Stack %s/%s: %v", ns, name, err)
	}
}

// TestSelectorAnnotations: the reconciler follows selector Locks live
// (docs/contract.md rules 4 and 15): every object a selector Lock covers carries
// the lock annotation naming it, including one created or labelled after
// the Lock, and one relabelled out of it loses it; a live selector Lock is
// active once its namespace carries the has-locks label, and one whose
// selector can never protect anything is InvalidTarget, saying why.
func TestSelectorAnnotations(t *testing.T) {
	ns := kube.NewNamespace(t, "selector")
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	createLabelledStack(t, ns, "web", map[string]string{"tier": "web"})
	all := framework.NewSelectorLock(ns, "all", lockv1alpha1.LockSelector{})
	db := framework.NewSelectorLock(ns, "tier-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}})
	lockOfLocks := framework.NewSelectorLock(ns, "locks", lockv1alpha1.LockSelector{Kinds: []string{"Lock"}})
	for _, l := range []*lockv1alpha1.Lock{all, db, lockOfLocks} {
		if err := kube.Client.Create(t.Context(), l); err != nil {
			t.Fatalf("creating Lock %s: %v", l.Name, err)
		}
	}
	kube.WaitActive(t, all, db)
	kube.WaitLockStatus(t, lockOfLocks, framework.InvalidStatus("selector.kinds: a Lock cannot protect another Lock: deleting a Lock is never blocked"))
	framework.Eventually(t, framework.DefaultTimeout, "namespace label", kube.NamespaceLabelled(ns, true))
	kube.WaitAnnotation(t, framework.StackGVK, ns, "db", "all,tier-db")
	kube.WaitAnnotation(t, framework.StackGVK, ns, "web", "all")

	createLabelledStack(t, ns, "later", nil)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "later", "all")
	relabel(t, ns, "later", "db")
	kube.WaitAnnotation(t, framework.StackGVK, ns, "later", "all,tier-db")
	relabel(t, ns, "db", "web")
	kube.WaitAnnotation(t, framework.StackGVK, ns, "db", "all")

	kube.DeleteLock(t, all)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "db", "")
	kube.WaitAnnotation(t, framework.StackGVK, ns, "web", "")
	kube.WaitAnnotation(t, framework.StackGVK, ns, "later", "tier-db")
}

// TestSelectorGuards (rule 15): every guard follows selector Locks. A {}
// Lock refuses deleting every object of its namespace, one created after
// the Lock at once, and the namespace; a tier=db Lock covers an object
// labelled into it later and stops covering one relabelled out of it,
// holds its namespace while it covers an existing object, refuses a
// cascade that would delete a covered dependent, and holds the CRD of a
// kind it covers an existing object of.
func TestSelectorGuards(t *testing.T) {
	ns := kube.NewNamespace(t, "selguard")
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	createLabelledStack(t, ns, "web", nil)
	kube.CreateObject(t, framework.PostgresClusterGVK, ns, "pg")
	all := kube.CreateLock(t, framework.NewSelectorLock(ns, "all", lockv1alpha1.LockSelector{}))
	// Created before the Lock is active: the deletes must be denied from
	// the create on.
	createLabelledStack(t, ns, "later", nil)
	for _, o := range []struct {
		gvk  schema.GroupVersionKind
		name string
	}{{framework.StackGVK, "db"}, {framework.StackGVK, "web"}, {framework.PostgresClusterGVK, "pg"}, {framework.StackGVK, "later"}} {
		kube.WantDenied(t, kube.DeleteObject(t.Context(), o.gvk, ns, o.name, client.DryRunAll), all)
		kube.WantDenied(t, kube.DeleteObject(t.Context(), o.gvk, ns, o.name), all)
	}
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns), client.DryRunAll), webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, all))
	kube.WaitActive(t, all)
	kube.DeleteLock(t, all)

	db := kube.CreateLock(t, framework.NewSelectorLock(ns, "tier-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}))
	kube.WaitActive(t, db)
	kube.WaitDenied(t, framework.StackGVK, ns, "db", db)
	relabel(t, ns, "later", "db")
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "later", client.DryRunAll), db)
	relabel(t, ns, "db", "web")
	if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "db", client.DryRunAll); err != nil {
		t.Errorf("dry-run delete of Stack db relabelled out of tier=db: %v, want it allowed", err)
	}
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns), client.DryRunAll), webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, db))

	owner := kube.CreateObject(t, framework.StackGVK, ns, "owner")
	kube.CreateOwned(t, framework.StackGVK, ns, "child", owner)
	relabel(t, ns, "child", "db")
	kube.WaitCascadeDenied(t, framework.StackGVK, ns, "owner", kube.CascadeDenialError([]*lockv1alpha1.Lock{db}, "Stack/child"))

	kind := "Widget" + rand.String(5)
	widget, crd := kube.InstallKind(t, kind, map[string]string{"lockguard-test": rand.String(8)})
	wns := kube.NewNamespace(t, "selcrd")
	w := framework.Object(widget, wns, "w1")
	w.SetLabels(map[string]string{"tier": "db"})
	if err := kube.Client.Create(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	widgets := kube.CreateLock(t, framework.NewSelectorLock(wns, "db-widgets", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}, Kinds: []string{kind}}))
	kube.WaitActive(t, widgets)
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), framework.CRD(crd), client.DryRunAll), webhook.GuardCRD, framework.CRDDenialMessage(widgets))
	kube.MustExist(t, framework.CRDGVK, "", crd)
}
