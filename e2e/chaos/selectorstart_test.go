//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestStartsWithSelectorLocks: a reconciler that starts where selector
// Locks exist, beside objects of several kinds, a kind whose CRD is
// deleted and one that is never served, goes to work. Its start is what a
// new leader's is after a leader change in the chaos run: the cache that
// every replica keeps for the cascade guard has synced the group's kinds
// (or, at a fresh start, syncs them within seconds: kind discovery looks
// again every second while one has not), so that its kind discovery adds
// their watches while the controller waits for the event handlers of
// its sources to take their initial lists; a selector Lock's handler,
// which reads the objects of the watched kinds, once waited there for
// the watch being added, which waited for the controller's start
// (chaos-short with selector Locks never converged, issue 24).
func TestStartsWithSelectorLocks(t *testing.T) {
	framework.Logs()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{CRDDirs: framework.CRDDirs(root)})
	k, err := env.Kube("selstart-")
	if err != nil {
		t.Fatal(err)
	}
	ns := k.NewNamespace(t, "sel")

	// Objects of two kinds, half of them tier=db, and of a third whose CRD
	// is deleted before lockguard starts.
	gone, goneCRD := k.InstallKind(t, "SelStartGadget", nil)
	k.CreateObject(t, gone, ns, "gadget")
	want := 0
	for i := range 4 {
		for _, gvk := range []schema.GroupVersionKind{framework.StackGVK, framework.PostgresClusterGVK} {
			u := framework.Object(gvk, ns, fmt.Sprintf("o-%d", i))
			if i%2 == 0 {
				u.SetLabels(map[string]string{"tier": "db"})
				want++
			}
			if err := k.Client.Create(t.Context(), u); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := k.Client.Delete(t.Context(), framework.CRD(goneCRD)); err != nil {
		t.Fatal(err)
	}
	// Selector Locks (more than the reconciler has workers, so that the
	// Lock source's handler takes a while over its initial list), and a
	// Lock on a kind that is never served. No webhook is registered yet:
	// the creates need none.
	const selectorLocks = 40
	for i := range selectorLocks {
		s := lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}
		if i%4 == 0 {
			s = lockv1alpha1.LockSelector{}
		}
		if err := k.Client.Create(t.Context(), &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("sel-%d", i)}, Spec: lockv1alpha1.LockSpec{Selector: &s}}); err != nil {
			t.Fatal(err)
		}
	}
	k.CreateLock(t, framework.NewLock(ns, "unserved", "NeverServed", "x", "a kind that is never served"))

	m, err := env.StartManager(framework.ManagerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("stopping lockguard: %v", err)
		}
	})

	// The reconciler works: a selector Lock that was there before the start
	// goes active and counts what it covers.
	took := framework.Eventually(t, framework.DefaultTimeout, "Lock sel-1 active, covering the tier=db objects", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "sel-1"}, &got); err != nil {
			return err
		}
		if !got.Status.Active || got.Status.Protected == nil || int(got.Status.Protected.Count) != want {
			return fmt.Errorf("not active over %d objects yet (status %+v)", want, got.Status)
		}
		return nil
	})
	t.Logf("a selector Lock of the %d there before the start active %s after the manager started", selectorLocks, took.Round(100*time.Millisecond))
	// And so does one created after the start.
	if err := k.Client.Create(t.Context(), &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late"}, Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "Lock late active", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := k.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late"}, &got); err != nil {
			return err
		}
		if !got.Status.Active {
			return fmt.Errorf("not active yet (status %+v)", got.Status)
		}
		return nil
	})
}
