//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
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

// Test06Cascade deletes a Stack that owns a locked PostgresCluster, with
// background and with foreground propagation. The garbage collector's
// delete of the child is denied like any other while the Lock exists;
// once the Lock is deleted, the garbage collector deletes the child at its
// next retry. The test reports how long that took.
func Test06Cascade(t *testing.T) {
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		t.Run(string(policy), func(t *testing.T) {
			ns := kube.NewNamespace(t, "cascade")
			parent := kube.CreateObject(t, framework.StackGVK, ns, "parent")
			child := framework.Object(framework.PostgresClusterGVK, ns, "child")
			child.SetOwnerReferences([]metav1.OwnerReference{{
				APIVersion:         framework.StackGVK.GroupVersion().String(),
				Kind:               "Stack",
				Name:               "parent",
				UID:                parent.GetUID(),
				Controller:         ptr.To(true),
				BlockOwnerDeletion: ptr.To(true),
			}})
			if err := kube.Client.Create(t.Context(), child); err != nil {
				t.Fatal(err)
			}
			lock := kube.CreateLock(t, framework.NewLock(ns, "keep-child", "PostgresCluster", "child", "the data outlives the stack"))
			kube.WaitActive(t, lock)

			blockedSince := time.Now()
			if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, "parent", client.PropagationPolicy(policy)); err != nil {
				t.Fatalf("deleting Stack parent (%s): %v", policy, err)
			}
			if policy == metav1.DeletePropagationBackground {
				framework.Eventually(t, framework.DefaultTimeout, "Stack parent gone", kube.Gone(framework.StackGVK, ns, "parent"))
			} else {
				// The owner waits for its blocking dependents.
				framework.Eventually(t, framework.DefaultTimeout, "Stack parent waiting for its dependents", func(ctx context.Context) error {
					p, err := kube.GetObject(ctx, framework.StackGVK, ns, "parent")
					if err != nil {
						return err
					}
					if p.GetDeletionTimestamp() == nil || !slices.Contains(p.GetFinalizers(), metav1.FinalizerDeleteDependents) {
						return fmt.Errorf("Stack parent: deletionTimestamp %v, finalizers %v; want it being deleted with %s", p.GetDeletionTimestamp(), p.GetFinalizers(), metav1.FinalizerDeleteDependents)
					}
					return nil
				})
			}
			framework.Consistently(t, blockedFor, "locked child while its owner is deleted", func(ctx context.Context) error {
				if err := kube.Exists(framework.PostgresClusterGVK, ns, "child")(ctx); err != nil {
					return err
				}
				if policy == metav1.DeletePropagationForeground {
					p, err := kube.GetObject(ctx, framework.StackGVK, ns, "parent")
					if err != nil {
						return fmt.Errorf("the owner should wait for its locked child: %w", err)
					}
					if p.GetDeletionTimestamp() == nil {
						return fmt.Errorf("Stack parent is no longer being deleted")
					}
				}
				return kube.AnnotationIs(framework.PostgresClusterGVK, ns, "child", "keep-child")(ctx)
			})

			start := time.Now()
			kube.DeleteLock(t, lock)
			d := framework.Eventually(t, gcBound, "garbage collector deletes the child after its Lock is gone", kube.Gone(framework.PostgresClusterGVK, ns, "child"))
			report(t, "%s propagation: the garbage collector deleted the child %s after its Lock was deleted (the child had been blocked for %s)",
				policy, d.Round(10*time.Millisecond), start.Sub(blockedSince).Round(100*time.Millisecond))
			if policy == metav1.DeletePropagationForeground {
				framework.Eventually(t, framework.DefaultTimeout, "Stack parent gone after its child", kube.Gone(framework.StackGVK, ns, "parent"))
			}
		})
	}
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
