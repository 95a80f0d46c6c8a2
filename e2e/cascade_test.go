//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// Bounds the tests enforce on the control plane's controllers (see
// README.md for what they are and where they come from).
const (
	// blockedFor is how long a test watches a locked child survive its
	// owner's deletion: long enough for the garbage collector to try,
	// and be denied, several times.
	blockedFor = 3 * time.Second
	// gcBound bounds how long after its Lock is deleted the garbage
	// collector deletes a child it was denied for blockedFor (its retry
	// backoff doubles from 5ms, so it is about blockedFor at most).
	gcBound = 30 * time.Second
	// namespaceBound bounds the deletion of a namespace holding locked
	// objects.
	namespaceBound = 60 * time.Second
)

// Test06Cascade (rule 6) deletes owners of locked objects with the
// garbage collector running. With background and foreground propagation
// the owner's delete is denied up front, dry run or not, and nothing is
// deleted or marked (no foregroundDeletion left hanging); once the Lock is
// gone, the owner's delete goes through and the collector deletes the
// child, and the test reports how long that took. Orphan is allowed with
// a warning and the child stays; a child with a second owner that stays
// is not in the cascade, so the owner's delete is allowed; a three-level
// chain is denied from its top, by name and by deletecollection.
func Test06Cascade(t *testing.T) {
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			ns := kube.NewNamespace(t, "cascade")
			parent := kube.CreateObject(t, framework.StackGVK, ns, "parent")
			kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "child", parent)
			lock := kube.CreateLock(t, framework.NewLock(ns, "keep-child", "PostgresCluster", "child", "the data outlives the stack"))
			kube.WaitActive(t, lock)

			want := kube.CascadeDenialError([]*lockv1alpha1.Lock{lock}, "PostgresCluster/child")
			kube.WaitCascadeDenied(t, framework.StackGVK, ns, "parent", want, client.PropagationPolicy(policy))
			framework.WantError(t, fmt.Sprintf("deleting Stack parent (%s)", policy),
				kube.DeleteObject(t.Context(), framework.StackGVK, ns, "parent", client.PropagationPolicy(policy)), want)
			// Had the delete been accepted, the collector would have had
			// seconds to act on it.
			framework.Consistently(t, blockedFor, "nothing deleted or marked", func(ctx context.Context) error {
				if err := untouched(ctx, framework.StackGVK, ns, "parent"); err != nil {
					return err
				}
				if err := untouched(ctx, framework.PostgresClusterGVK, ns, "child"); err != nil {
					return err
				}
				return kube.AnnotationIs(framework.PostgresClusterGVK, ns, "child", "keep-child")(ctx)
			})

			kube.DeleteLock(t, lock)
			deleteOnceAllowed(t, framework.StackGVK, ns, "parent", client.PropagationPolicy(policy))
			d := framework.Eventually(t, gcBound, "garbage collector deletes the child once its Lock is gone", kube.Gone(framework.PostgresClusterGVK, ns, "child"))
			report(t, "%s propagation: the owner's delete was denied whole; once the Lock was deleted, the owner's delete was accepted and the garbage collector deleted the child %s later",
				policy, d.Round(10*time.Millisecond))
			framework.Eventually(t, framework.DefaultTimeout, "Stack parent gone", kube.Gone(framework.StackGVK, ns, "parent"))
		})
	}

	t.Run("Orphan", func(t *testing.T) {
		ns := kube.NewNamespace(t, "cascade")
		parent := kube.CreateObject(t, framework.StackGVK, ns, "parent")
		kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "child", parent)
		lock := kube.CreateLock(t, framework.NewLock(ns, "keep-child", "PostgresCluster", "child", ""))
		kube.WaitActive(t, lock)
		kube.WaitCascadeDenied(t, framework.StackGVK, ns, "parent", kube.CascadeDenialError([]*lockv1alpha1.Lock{lock}, "PostgresCluster/child"))

		c, warnings := framework.WarningClient(t, s.cfg)
		orphan := client.PropagationPolicy(metav1.DeletePropagationOrphan)
		if err := c.Delete(t.Context(), framework.Object(framework.StackGVK, ns, "parent"), orphan, client.DryRunAll); err != nil {
			t.Fatalf("a dry-run delete of Stack parent with propagation Orphan: %v; want it allowed", err)
		}
		if err := untouched(t.Context(), framework.StackGVK, ns, "parent"); err != nil {
			t.Fatalf("after a dry run: %v", err)
		}
		if err := c.Delete(t.Context(), framework.Object(framework.StackGVK, ns, "parent"), orphan); err != nil {
			t.Fatalf("deleting Stack parent with propagation Orphan: %v; want it allowed", err)
		}
		want := "the dependents of this resource are orphaned, not deleted; locked dependents that stay: PostgresCluster/child (Lock(s) [keep-child])"
		if got := warnings.All(); len(got) != 2 || got[0] != want || got[1] != want {
			t.Fatalf("warnings %q; want the dry run's and the delete's, each %q", got, want)
		}
		framework.Eventually(t, framework.DefaultTimeout, "Stack parent gone", kube.Gone(framework.StackGVK, ns, "parent"))
		framework.Eventually(t, framework.DefaultTimeout, "the collector removes the child's reference to its owner", func(ctx context.Context) error {
			child, err := kube.GetObject(ctx, framework.PostgresClusterGVK, ns, "child")
			if err != nil {
				return err
			}
			if refs := child.GetOwnerReferences(); len(refs) > 0 {
				return fmt.Errorf("PostgresCluster child still has owner references %v", refs)
			}
			return nil
		})
		kube.MustExist(t, framework.PostgresClusterGVK, ns, "child")
	})

	t.Run("SecondOwner", func(t *testing.T) {
		ns := kube.NewNamespace(t, "cascade")
		parent := kube.CreateObject(t, framework.StackGVK, ns, "parent")
		other := kube.CreateObject(t, framework.StackGVK, ns, "other")
		kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "child", parent, other)
		lock := kube.CreateLock(t, framework.NewLock(ns, "keep-child", "PostgresCluster", "child", ""))
		kube.WaitActive(t, lock)
		if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "parent", client.DryRunAll); err != nil {
			t.Fatalf("a dry-run delete of Stack parent, whose child has another owner: %v; want it allowed", err)
		}
		if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "parent"); err != nil {
			t.Fatalf("deleting Stack parent, whose child has another owner: %v; want it allowed", err)
		}
		framework.Eventually(t, framework.DefaultTimeout, "Stack parent gone", kube.Gone(framework.StackGVK, ns, "parent"))
		framework.Eventually(t, framework.DefaultTimeout, "the collector removes the child's reference to the deleted owner", func(ctx context.Context) error {
			child, err := kube.GetObject(ctx, framework.PostgresClusterGVK, ns, "child")
			if err != nil {
				return err
			}
			if refs := child.GetOwnerReferences(); len(refs) != 1 || refs[0].Name != "other" {
				return fmt.Errorf("PostgresCluster child has owner references %v; want only Stack other", refs)
			}
			return nil
		})
		if err := untouched(t.Context(), framework.PostgresClusterGVK, ns, "child"); err != nil {
			t.Fatal(err)
		}
		// Now its only owner: the cascade reaches it.
		kube.WaitCascadeDenied(t, framework.StackGVK, ns, "other", kube.CascadeDenialError([]*lockv1alpha1.Lock{lock}, "PostgresCluster/child"))
	})

	t.Run("ThreeLevels", func(t *testing.T) {
		ns := kube.NewNamespace(t, "cascade")
		root := kube.CreateObject(t, framework.StackGVK, ns, "root")
		mid := kube.CreateOwned(t, framework.StackGVK, ns, "mid", root)
		kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "leaf", mid)
		lock := kube.CreateLock(t, framework.NewLock(ns, "keep-leaf", "PostgresCluster", "leaf", ""))
		kube.WaitActive(t, lock)
		want := kube.CascadeDenialError([]*lockv1alpha1.Lock{lock}, "PostgresCluster/leaf")
		kube.WaitCascadeDenied(t, framework.StackGVK, ns, "root", want)
		kube.WaitCascadeDenied(t, framework.StackGVK, ns, "mid", want)
		framework.WantError(t, "deleting Stack root", kube.DeleteObject(t.Context(), framework.StackGVK, ns, "root"), want)
		framework.WantError(t, "deleting Stack root (foreground)", kube.DeleteObject(t.Context(), framework.StackGVK, ns, "root", client.PropagationPolicy(metav1.DeletePropagationForeground)), want)
		// kubectl delete stacks --all: deletecollection, each Stack reviewed.
		all := framework.Object(framework.StackGVK, ns, "")
		framework.WantError(t, "deleting every Stack (dry run)", kube.Client.DeleteAllOf(t.Context(), all, client.InNamespace(ns), client.DryRunAll), want)
		framework.WantError(t, "deleting every Stack", kube.Client.DeleteAllOf(t.Context(), all, client.InNamespace(ns)), want)
		framework.Consistently(t, blockedFor, "nothing deleted or marked", func(ctx context.Context) error {
			for name, gvk := range map[string]schema.GroupVersionKind{"root": framework.StackGVK, "mid": framework.StackGVK, "leaf": framework.PostgresClusterGVK} {
				if err := untouched(ctx, gvk, ns, name); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// Test06CascadeEveryReplica: every replica, the leader and the others,
// walks cascades (its owner index runs outside leader election): each is
// sent the review of an owner's delete directly, and denies it.
func Test06CascadeEveryReplica(t *testing.T) {
	ns := kube.NewNamespace(t, "cascade")
	replicaCount(t)
	parent := kube.CreateObject(t, framework.StackGVK, ns, "parent")
	kube.CreateOwned(t, framework.PostgresClusterGVK, ns, "child", parent)
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-child", "PostgresCluster", "child", ""))
	kube.WaitActive(t, lock)
	parent = kube.MustExist(t, framework.StackGVK, ns, "parent")
	want := webhook.CascadeDenialMessage([]lockv1alpha1.Lock{*lock}, []string{"PostgresCluster/child"})

	scale(t, 2)
	replicas, err := s.lg.Replicas(t.Context())
	if err != nil || len(replicas) != 2 {
		t.Fatalf("replicas: %d, %v; want 2", len(replicas), err)
	}
	for _, r := range replicas {
		for _, name := range []string{"parent", ""} { // by name, and as a deletecollection sends it
			framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("%s denies the delete of Stack parent (name %q)", r.Name(), name), func(ctx context.Context) error {
				got, err := r.Review(ctx, deleteReview(t, parent, name))
				if err != nil {
					return err
				}
				if resp := got.Response; resp == nil || resp.Allowed || resp.Result == nil || resp.Result.Code != 403 || resp.Result.Message != want {
					return fmt.Errorf("%s answered %+v; want denied with %q", r.Name(), resp, want)
				}
				return nil
			})
		}
	}
}

// untouched returns an error unless the object exists, is not being
// deleted and carries no finalizer (a foreground delete let through would
// leave foregroundDeletion on it).
func untouched(ctx context.Context, gvk schema.GroupVersionKind, ns, name string) error {
	o, err := kube.GetObject(ctx, gvk, ns, name)
	if err != nil {
		return fmt.Errorf("%s %s/%s: %w", gvk.Kind, ns, name, err)
	}
	if o.GetDeletionTimestamp() != nil || len(o.GetFinalizers()) > 0 {
		return fmt.Errorf("%s %s/%s: deletionTimestamp %v, finalizers %v; want it untouched", gvk.Kind, ns, name, o.GetDeletionTimestamp(), o.GetFinalizers())
	}
	return nil
}

// deleteOnceAllowed deletes an owner whose locked descendants' Locks were
// just deleted: a replica whose cache has not seen a Lock go yet still
// denies (the safe side of cache lag), so a denial is retried until the
// deadline; any other error fails the test.
func deleteOnceAllowed(t *testing.T, gvk schema.GroupVersionKind, ns, name string, opts ...client.DeleteOption) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("deleting %s %s/%s once unlocked", gvk.Kind, ns, name), func(ctx context.Context) error {
		err := kube.DeleteObject(ctx, gvk, ns, name, opts...)
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatalf("deleting %s %s/%s once unlocked: %v", gvk.Kind, ns, name, err)
		}
		return err
	})
}

// Test07NamespaceDeletion deletes namespaces with the namespace
// controller running (rule 11). A namespace holding locked objects is
// refused up front, whole: nothing in it is deleted. Once its Locks are
// deleted, the namespace controller deletes it and everything in it. While
// lockguard is down, a namespace holding Locks is refused (its webhook
// entry fails closed), and one without Locks is never sent to lockguard:
// its delete is accepted, and only its core.navique.com objects wait for
// lockguard (their own deletes fail closed) to be back.
func Test07NamespaceDeletion(t *testing.T) {
	// populate fills a namespace with locked and unlocked objects.
	populate := func(t *testing.T) (string, []*lockv1alpha1.Lock) {
		ns := kube.NewNamespace(t, "doomed")
		kube.CreateObject(t, framework.StackGVK, ns, "app")
		kube.CreateObject(t, framework.PostgresClusterGVK, ns, "db")
		kube.CreateObject(t, framework.StackGVK, ns, "free")
		locks := []*lockv1alpha1.Lock{
			kube.CreateLock(t, framework.NewLock(ns, "keep-app", "Stack", "app", "")),
			kube.CreateLock(t, framework.NewLock(ns, "keep-db", "PostgresCluster", "db", "")),
			kube.CreateLock(t, framework.NewLock(ns, "keep-db-too", "PostgresCluster", "db", "")),
		}
		kube.WaitActive(t, locks...)
		kube.WaitAnnotation(t, framework.PostgresClusterGVK, ns, "db", "keep-db,keep-db-too")
		return ns, locks
	}
	namespace := func(ns string) *corev1.Namespace { return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}} }
	// intact checks that the namespace is not terminating and that its
	// objects are all there.
	intact := func(t *testing.T, ns string, names ...string) {
		t.Helper()
		var n corev1.Namespace
		if err := kube.Client.Get(t.Context(), client.ObjectKey{Name: ns}, &n); err != nil || n.DeletionTimestamp != nil {
			t.Fatalf("namespace %s: %v, deletionTimestamp %v; want it untouched", ns, err, n.DeletionTimestamp)
		}
		kube.MustExist(t, framework.StackGVK, ns, "app")
		kube.MustExist(t, framework.StackGVK, ns, "free")
		kube.MustExist(t, framework.PostgresClusterGVK, ns, "db")
		for _, name := range names {
			if err := kube.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, &lockv1alpha1.Lock{}); err != nil {
				t.Fatalf("Lock %s/%s: %v; want it untouched", ns, name, err)
			}
		}
	}
	// waitDeleted waits until the namespace is gone and returns the last
	// NamespaceDeletionContentFailure message seen on the way.
	waitDeleted := func(t *testing.T, ns string, timeout time.Duration) (time.Duration, string) {
		var failure string
		d := framework.Eventually(t, timeout, "namespace deleted", func(ctx context.Context) error {
			var n corev1.Namespace
			err := kube.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NamespaceDeletionContentFailure && c.Status == corev1.ConditionTrue {
					failure = c.Message
				}
			}
			return fmt.Errorf("namespace %s is %s", ns, n.Status.Phase)
		})
		return d, failure
	}

	t.Run("lockguard running", func(t *testing.T) {
		ns, locks := populate(t)
		kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(ns)), webhook.GuardNamespace,
			framework.NamespaceDenialMessage(ns, locks...))
		// The namespace controller would have had seconds to delete
		// something, had the delete been accepted.
		framework.Consistently(t, blockedFor, "nothing deleted", func(ctx context.Context) error {
			for _, gvk := range []schema.GroupVersionKind{framework.StackGVK, framework.PostgresClusterGVK} {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				if err := kube.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
					return err
				}
				for _, o := range list.Items {
					if o.GetDeletionTimestamp() != nil {
						return fmt.Errorf("%s %s is being deleted", gvk.Kind, o.GetName())
					}
				}
			}
			return nil
		})
		intact(t, ns, "keep-app", "keep-db", "keep-db-too")

		for _, l := range locks {
			kube.DeleteLock(t, l)
		}
		kube.DeleteOnceUnguarded(t, namespace(ns))
		d, failure := waitDeleted(t, ns, namespaceBound)
		report(t, "namespace deleted %s after its Locks were (bound %s)", d.Round(100*time.Millisecond), namespaceBound)
		if failure != "" {
			t.Logf("seen while terminating: %s: %s", corev1.NamespaceDeletionContentFailure, failure)
		}
	})

	t.Run("lockguard down", func(t *testing.T) {
		n := replicaCount(t)
		locked, locks := populate(t)
		free := kube.NewNamespace(t, "nolocks")
		kube.CreateObject(t, framework.StackGVK, free, "app")
		if err := kube.Client.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: free, Name: "cm"}}); err != nil {
			t.Fatal(err)
		}
		// Stopped first: in a cluster, replicas keep serving for a while
		// after SIGTERM (--shutdown-delay).
		scale(t, 0)

		err := kube.Client.Delete(t.Context(), namespace(locked))
		prefix := fmt.Sprintf("Internal error occurred: failed calling webhook %q: failed to call webhook: ", kube.GuardWebhookName(webhook.GuardNamespace))
		if err == nil || !apierrors.IsInternalError(err) || !strings.HasPrefix(err.Error(), prefix) {
			t.Fatalf("deleting namespace %s holding Locks while lockguard is down: %v; want an InternalError starting with %q", locked, err, prefix)
		}
		intact(t, locked, "keep-app", "keep-db", "keep-db-too")

		// Never sent to lockguard: accepted at once.
		deleted := time.Now()
		if err := kube.Client.Delete(t.Context(), namespace(free)); err != nil {
			t.Fatalf("deleting namespace %s without Locks while lockguard is down: %v", free, err)
		}
		// Its Stack remains (its delete fails closed); the rest goes.
		failed := fmt.Sprintf("Internal error occurred: failed calling webhook %q: failed to call webhook: ", kube.WebhookName)
		framework.Eventually(t, namespaceBound, "namespace deletion waits for lockguard", func(ctx context.Context) error {
			var ns corev1.Namespace
			if err := kube.Client.Get(ctx, client.ObjectKey{Name: free}, &ns); err != nil {
				return err
			}
			for _, c := range ns.Status.Conditions {
				if c.Type == corev1.NamespaceDeletionContentFailure && c.Status == corev1.ConditionTrue && strings.Count(c.Message, failed) == 1 {
					return nil
				}
			}
			return fmt.Errorf("namespace %s is %s with conditions %+v; want %s with one %q", free, ns.Status.Phase, ns.Status.Conditions, corev1.NamespaceDeletionContentFailure, failed)
		})
		framework.Eventually(t, namespaceBound, "ConfigMap deleted", func(ctx context.Context) error {
			err := kube.Client.Get(ctx, client.ObjectKey{Namespace: free, Name: "cm"}, &corev1.ConfigMap{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("ConfigMap cm still there: %v", err)
		})
		kube.MustExist(t, framework.StackGVK, free, "app")

		back := time.Now()
		scale(t, n)
		waitDeleted(t, free, namespaceBound)
		report(t, "lockguard down: a namespace without Locks was accepted, its Stack waited for lockguard (%s), and it was deleted %s after lockguard was back",
			back.Sub(deleted).Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
		kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), namespace(locked)), webhook.GuardNamespace,
			framework.NamespaceDenialMessage(locked, locks...))
		intact(t, locked, "keep-app", "keep-db", "keep-db-too")
	})
}

// Test07NamespaceGuardedOnCreate (docs/contract.md rule 11, the label's gap): the
// replica that admits a Lock create puts the has-locks label on the Lock's
// namespace before allowing it, and the reconciler keeps the label while
// the create is pending, so a namespace delete sent the moment a Lock's
// create returns is denied. Each iteration is a fresh, unlabelled
// namespace; the delete is a dry run (the same answer, rule 10). Needs the
// peer protocol (the suite's local replicas run it).
func Test07NamespaceGuardedOnCreate(t *testing.T) {
	if _, ok := s.lg.(*localLockguard); !ok {
		t.Skip("needs the suite's replicas with the peer protocol (local mode)")
	}
	const iterations = 20
	denied := 0
	for i := range iterations {
		ns := kube.NewNamespace(t, fmt.Sprintf("fresh-%d", i))
		kube.CreateObject(t, framework.StackGVK, ns, "app")
		l := kube.CreateLock(t, framework.NewLock(ns, "keep-app", "Stack", "app", ""))
		err := kube.Client.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.DryRunAll)
		switch {
		case err == nil:
			t.Errorf("VIOLATION: a dry-run delete of namespace %s, sent the moment Lock %s's create returned, was allowed", ns, l.Name)
		default:
			kube.WantGuardDenied(t, err, webhook.GuardNamespace, framework.NamespaceDenialMessage(ns, l))
			denied++
		}
	}
	report(t, "Test07NamespaceGuardedOnCreate: %d fresh namespaces, each deleted (dry run) the moment its first Lock's create returned: %d denied", iterations, denied)
}
