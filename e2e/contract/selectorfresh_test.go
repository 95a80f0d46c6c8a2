package contract_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestCascadeRightAfterSelectorLockOfNewKey (rules 6 and 15, issue 38):
// the metadata cache keeps, of a namespaced object, only the labels that
// some selector Lock of its namespace reads, so a selector Lock on a
// label key no Lock read before finds the objects it covers cached
// without that label. Its protection still holds from its create's
// response: deleting an owner whose cascade would delete a Stack the new
// Lock covers, right after the Lock's create, is denied naming it, for
// each of several Locks, each on a key of its own. Each Lock then reports
// the Stack it covers, which carries its annotation.
func TestCascadeRightAfterSelectorLockOfNewKey(t *testing.T) {
	const n = 8
	ns := kube.NewNamespace(t, "fresh-key")
	suffix := rand.String(6)
	keys := make([]string, n)
	for i := range n {
		keys[i] = fmt.Sprintf("fresh-%s-%d", suffix, i)
		root := kube.CreateObject(t, framework.StackGVK, ns, fmt.Sprintf("root-%d", i))
		child := framework.Object(framework.StackGVK, ns, fmt.Sprintf("child-%d", i))
		child.SetLabels(map[string]string{keys[i]: "kept"})
		child.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: root.GetAPIVersion(), Kind: root.GetKind(), Name: root.GetName(), UID: root.GetUID()}})
		if err := kube.Client.Create(t.Context(), child); err != nil {
			t.Fatal(err)
		}
	}
	// The Stacks' informer delivers in order: once it has the probe's
	// child, it has every child above, cached before their keys are read.
	probeRoot := kube.CreateObject(t, framework.StackGVK, ns, "probe-root")
	kube.CreateOwned(t, framework.StackGVK, ns, "probe-child", probeRoot)
	probe := kube.CreateLock(t, framework.NewLock(ns, "probe", "Stack", "probe-child", "the probe"))
	kube.WaitCascadeDenied(t, framework.StackGVK, ns, "probe-root", kube.CascadeDenialError([]*lockv1alpha1.Lock{probe}, "Stack/probe-child"))

	locks := make([]*lockv1alpha1.Lock, n)
	for i := range n {
		locks[i] = kube.CreateLock(t, framework.NewSelectorLock(ns, fmt.Sprintf("sel-%d", i), lockv1alpha1.LockSelector{MatchLabels: map[string]string{keys[i]: "kept"}}))
		want := kube.CascadeDenialError(locks[i:i+1], fmt.Sprintf("Stack/child-%d", i))
		root := fmt.Sprintf("root-%d", i)
		opts := []client.DeleteOption{client.DryRunAll}
		if i%2 == 1 {
			opts = nil // a real delete, every other Lock
		}
		framework.WantError(t, fmt.Sprintf("deleting Stack %s right after Lock %s's create", root, locks[i].Name), kube.DeleteObject(t.Context(), framework.StackGVK, ns, root, opts...), want)
	}
	for i, l := range locks {
		kube.MustExist(t, framework.StackGVK, ns, fmt.Sprintf("root-%d", i))
		kube.WaitActive(t, l)
		kube.WaitAnnotation(t, framework.StackGVK, ns, fmt.Sprintf("child-%d", i), l.Name)
		framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("Lock %s reports Stack child-%d", l.Name, i), func(ctx context.Context) error {
			var got lockv1alpha1.Lock
			if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(l), &got); err != nil {
				return err
			}
			if p := got.Status.Protected; p == nil || p.Count != 1 || len(p.Resources) != 1 || p.Resources[0].Name != fmt.Sprintf("child-%d", i) {
				return fmt.Errorf("status.protected %+v", got.Status.Protected)
			}
			return nil
		})
	}
}
