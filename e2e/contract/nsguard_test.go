package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// namespaceLabelIs checks that namespace ns carries the has-locks label
// (want true) or not.
func namespaceLabelIs(ns string, want bool) func(context.Context) error {
	return kube.NamespaceLabelled(ns, want)
}

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// TestNamespaceGuard (rule 11): deleting a namespace that holds a live Lock
// on an existing object is denied, dry run or not, naming the Locks that
// protect something; nothing in it is touched. Once those Locks are gone,
// its delete is allowed.
func TestNamespaceGuard(t *testing.T) {
	ns := kube.NewNamespace(t, "nsguard")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-forge", "Stack", "forge", "production"))
	kube.CreateLock(t, framework.NewLock(ns, "keep-nothing", "Stack", "absent", ""))
	kube.WaitActive(t, lock)
	if err := namespaceLabelIs(ns, true)(t.Context()); err != nil {
		t.Fatalf("an active Lock's namespace must carry the label: %v", err)
	}

	want := framework.NamespaceDenialMessage(ns, lock)
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns), client.DryRunAll), webhook.GuardNamespace, want)
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns)), webhook.GuardNamespace, want)
	var n corev1.Namespace
	if err := kube.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &n); err != nil || n.DeletionTimestamp != nil {
		t.Fatalf("namespace %s after a denied delete: %v, deletionTimestamp %v; want it untouched", ns, err, n.DeletionTimestamp)
	}
	kube.MustExist(t, framework.StackGVK, ns, "forge")
	// Rule 14: the real denial (not the dry run) is recorded on the Lock
	// that denied it, and on no other.
	framework.Eventually(t, framework.DefaultTimeout, "DeleteBlocked recorded on Lock keep-forge", func(ctx context.Context) error {
		var list eventsv1.EventList
		if err := kube.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var blocked []string
		for _, e := range list.Items {
			if e.Reason == webhook.ReasonDeleteBlocked {
				blocked = append(blocked, e.Regarding.Kind+"/"+e.Regarding.Name+": "+e.Note)
			}
		}
		prefix := fmt.Sprintf(`Lock/keep-forge: Denied the DELETE of Namespace %q by `, ns)
		if len(blocked) != 1 || !strings.HasPrefix(blocked[0], prefix) {
			return fmt.Errorf("DeleteBlocked Events %q; want one, %q...", blocked, prefix)
		}
		return nil
	})

	kube.DeleteLock(t, lock)
	kube.DeleteOnceUnguarded(t, namespace(ns), client.DryRunAll)
	kube.DeleteOnceUnguarded(t, namespace(ns))
}

// TestNamespaceGuardWarnsAndTerminating (rules 11, 14): a namespace whose
// Locks all point at missing objects is deleted, with a warning that says
// so; deleting it again while it terminates is not blocked.
func TestNamespaceGuardWarnsAndTerminating(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "nswarn")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-nothing", "Stack", "absent", ""))
	kube.WaitLockStatus(t, lock, framework.MissingStatus(lock))
	framework.Eventually(t, framework.DefaultTimeout, "namespace labelled", namespaceLabelIs(ns, true))

	c, warnings := warningClient(t)
	if err := c.Delete(t.Context(), namespace(ns)); err != nil {
		t.Fatalf("deleting namespace %s whose Locks protect nothing: %v", ns, err)
	}
	want := fmt.Sprintf("namespace %s holds Lock(s) [keep-nothing] whose targets do not exist: they protect nothing", ns)
	if got := warnings.All(); len(got) != 1 || got[0] != want {
		t.Fatalf("warnings %q; want [%q]", got, want)
	}
	// Terminating (no namespace controller runs in this suite): a second
	// delete is not blocked further.
	if err := kube.Client.Delete(t.Context(), namespace(ns)); err != nil {
		t.Fatalf("deleting the terminating namespace %s again: %v", ns, err)
	}
}

// TestNamespaceLabel: the has-locks label follows the live Locks of a
// namespace, level-based: set with the first Lock, put back when removed
// by hand, removed with the last Lock, and never written while right.
func TestNamespaceLabel(t *testing.T) {
	ns := kube.NewNamespace(t, "nslabel")
	if err := namespaceLabelIs(ns, false)(t.Context()); err != nil {
		t.Fatal(err)
	}
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	first := kube.CreateLock(t, framework.NewLock(ns, "first", "Stack", "forge", ""))
	second := kube.CreateLock(t, framework.NewLock(ns, "second", "Stack", "forge", ""))
	kube.WaitActive(t, first, second)
	framework.Eventually(t, framework.DefaultTimeout, "namespace labelled", namespaceLabelIs(ns, true))

	// Steady: no writes.
	var n corev1.Namespace
	if err := kube.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &n); err != nil {
		t.Fatal(err)
	}
	framework.Consistently(t, 3*time.Second, "namespace not written while steady", func(ctx context.Context) error {
		var now corev1.Namespace
		if err := kube.Client.Get(ctx, client.ObjectKey{Name: ns}, &now); err != nil {
			return err
		}
		if now.ResourceVersion != n.ResourceVersion {
			return fmt.Errorf("namespace %s written: resourceVersion %s, was %s", ns, now.ResourceVersion, n.ResourceVersion)
		}
		return nil
	})

	// Removed by hand: put back.
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, lockv1alpha1.HasLocksLabel)
	if err := kube.Client.Patch(t.Context(), namespace(ns), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "label put back", namespaceLabelIs(ns, true))
	kube.WaitActive(t, first, second)

	// Stays with a live Lock, goes with the last.
	kube.DeleteLock(t, first)
	if err := namespaceLabelIs(ns, true)(t.Context()); err != nil {
		t.Fatalf("with Lock second left: %v", err)
	}
	kube.DeleteLock(t, second)
	framework.Eventually(t, framework.DefaultTimeout, "label removed with the last Lock", namespaceLabelIs(ns, false))
}

// warningClient returns an admin client of the suite's API server and the
// recorder of the warnings its requests get.
func warningClient(t *testing.T) (client.Client, *framework.Warnings) {
	t.Helper()
	return framework.WarningClient(t, suite.env.Config)
}
