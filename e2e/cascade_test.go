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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
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

// Test07NamespaceDeletion deletes a namespace holding locked objects. The
// namespace controller deletes all of its content, the Locks included
// (deleting a Lock is never blocked), so the locked objects' deletes are
// denied only until lockguard sees their Locks gone; the namespace
// controller retries, and the namespace is gone within namespaceBound.
// While lockguard is down, the namespace stays Terminating (every
// core.navique.com delete fails closed) and goes once lockguard is back.
func Test07NamespaceDeletion(t *testing.T) {
	// populate fills a namespace with locked and unlocked objects.
	populate := func(t *testing.T) string {
		ns := kube.NewNamespace(t, "doomed")
		kube.CreateObject(t, framework.StackGVK, ns, "app")
		kube.CreateObject(t, framework.PostgresClusterGVK, ns, "db")
		kube.CreateObject(t, framework.StackGVK, ns, "free")
		kube.WaitActive(t,
			kube.CreateLock(t, framework.NewLock(ns, "keep-app", "Stack", "app", "")),
			kube.CreateLock(t, framework.NewLock(ns, "keep-db", "PostgresCluster", "db", "")),
			kube.CreateLock(t, framework.NewLock(ns, "keep-db-too", "PostgresCluster", "db", "")))
		kube.WaitAnnotation(t, framework.PostgresClusterGVK, ns, "db", "keep-db,keep-db-too")
		return ns
	}
	// deleteNamespace deletes the namespace and returns when it did.
	deleteNamespace := func(t *testing.T, ns string) time.Time {
		deleted := time.Now()
		if err := kube.Client.Delete(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
		return deleted
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
		ns := populate(t)
		deleteNamespace(t, ns)
		d, failure := waitDeleted(t, ns, namespaceBound)
		report(t, "namespace with locked objects deleted in %s (bound %s)", d.Round(100*time.Millisecond), namespaceBound)
		if failure != "" {
			t.Logf("seen while terminating: %s: %s", corev1.NamespaceDeletionContentFailure, failure)
		}
	})

	t.Run("lockguard down", func(t *testing.T) {
		n := replicaCount(t)
		ns := populate(t)
		// Stopped first: in a cluster, replicas keep serving for a while
		// after SIGTERM (--shutdown-delay).
		scale(t, 0)
		deleted := deleteNamespace(t, ns)
		// Stacks and PostgresClusters remain.
		prefix := "Failed to delete all resource types, 2 remaining: "
		failed := fmt.Sprintf("Internal error occurred: failed calling webhook %q: failed to call webhook: ", kube.WebhookName)
		framework.Eventually(t, namespaceBound, "namespace deletion fails closed", func(ctx context.Context) error {
			var n corev1.Namespace
			if err := kube.Client.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NamespaceDeletionContentFailure && c.Status == corev1.ConditionTrue &&
					strings.HasPrefix(c.Message, prefix) && strings.Count(c.Message, failed) == 2 {
					return nil
				}
			}
			return fmt.Errorf("namespace %s is %s with conditions %+v; want %s %q followed by two %q", ns, n.Status.Phase, n.Status.Conditions, corev1.NamespaceDeletionContentFailure, prefix, failed)
		})
		for _, name := range []string{"app", "free"} {
			if err := kube.Exists(framework.StackGVK, ns, name)(t.Context()); err != nil {
				t.Fatalf("with lockguard down, the namespace controller cannot delete Stacks: %v", err)
			}
		}
		var lock lockv1alpha1.Lock
		if err := kube.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "keep-app"}, &lock); !apierrors.IsNotFound(err) {
			t.Fatalf("the namespace controller should have deleted the Locks (they are never blocked): %v", err)
		}
		back := time.Now()
		scale(t, n)
		waitDeleted(t, ns, namespaceBound)
		report(t, "lockguard down: the namespace stayed Terminating while lockguard was down (%s), and was deleted %s after lockguard was back",
			back.Sub(deleted).Round(100*time.Millisecond), time.Since(back).Round(100*time.Millisecond))
	})
}
