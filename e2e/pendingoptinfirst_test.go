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
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// firstLockBatch is how many iterations of Test14OptInSelectorFirst share
// a batch: their namespaces are created together, before any of their
// Locks.
const firstLockBatch = 10

// protectLockedEntry is the chart's webhook entry for the DELETEs of the
// objects labelled core.navique.com/protected.
const protectLockedEntry = "protect-locked.lockguard.core.navique.com"

// Test14OptInSelectorFirst is Test14OptIn with a selector Lock as each
// namespace's first Lock (issue 40, docs/optin.md): the admission of its
// create labels the PVCs it covers core.navique.com/protected before
// allowing it, so a delete sent the moment the create returns reaches
// lockguard through the protect-locked entry even while the API server's
// namespace cache does not show the namespace's has-locks label yet. Three
// replicas, as Test14OptIn; $LOCKGUARD_PENDING_ITERATIONS (default 100)
// iterations, each in two fresh namespaces (Lock creates routed to b,
// deletes to a, and the reverse; the PVC deletes reach the front, pinned
// to f). The namespaces are created a batch (firstLockBatch iterations) at
// a time, then a labelled PVC in each, so that the API server's namespace
// cache holds each namespace, without has-locks, when its first Lock, a
// selector Lock whose kinds name PersistentVolumeClaim, is created and
// its PVC deleted at once: every delete must be denied naming the Lock,
// by the protect-locked entry (the PVC labelled before the create
// returned), never by protect, whose namespaceSelector the API server
// matches against its namespace cache: the window is rare (1 of 200 in
// Test14OptIn once, before the label), so it is the entry that shows it
// closed, the count that it held.
// Local mode only.
func Test14OptInSelectorFirst(t *testing.T) {
	ll, a, b, f := threeWarmReplicas(t)
	var namespaces []string
	iterations := pendingIterations(t)
	// Registered first, so run last (Test14OptIn says why).
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), namespaceBound+time.Duration(iterations)*400*time.Millisecond)
		defer cancel()
		for _, ns := range namespaces {
			waitNamespaceGone(ctx, t, ns)
		}
	})
	unpin := ll.set.Front.Pin(f.Address())
	defer unpin()
	routeAround(t)
	routes := [2]string{"first-ab", "first-ba"}
	installRoutes(t, ll.set.Webhook.CA, map[string][2]*framework.Replica{routes[0]: {b, a}, routes[1]: {a, b}})

	slipped, denied, notLabelled := 0, 0, 0
	var locking time.Duration
	start := time.Now()
	for batch := 0; batch < iterations; batch += firstLockBatch {
		var fresh []string
		for range min(firstLockBatch, iterations-batch) {
			for _, route := range routes {
				fresh = append(fresh, routedNamespace(t, "first-pvc", route))
			}
		}
		namespaces = append(namespaces, fresh...)
		for _, ns := range fresh {
			pvc := newPVC(ns, "data")
			pvc.Labels = map[string]string{pendingSelectorLabel: "data"}
			if err := kube.Client.Create(t.Context(), pvc); err != nil {
				t.Fatal(err)
			}
		}
		lockStart := time.Now()
		for _, ns := range fresh {
			l := framework.NewSelectorLock(ns, "first", lockv1alpha1.LockSelector{
				MatchLabels: map[string]string{pendingSelectorLabel: "data"}, Kinds: []string{"PersistentVolumeClaim"}})
			if err := framework.RetryLockCreate(t.Context(), func(ctx context.Context) error { return kube.Client.Create(ctx, l) }); err != nil {
				t.Fatalf("creating Lock %s/%s: %v", l.Namespace, l.Name, err)
			}
			switch err := kube.Client.Delete(t.Context(), newPVC(ns, "data")); {
			case err == nil:
				slipped++
				t.Errorf("VIOLATION: PVC %s/data deleted right after the create of its namespace's first Lock, selector Lock %s", ns, l.Name)
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), framework.DenialMessage(l)):
				denied++
				if !strings.Contains(err.Error(), fmt.Sprintf("admission webhook %q denied", protectLockedEntry)) {
					// Denied all the same, but through protect, whose
					// namespaceSelector the namespace cache decides.
					notLabelled++
					var got corev1.PersistentVolumeClaim
					gerr := kube.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: "data"}, &got)
					t.Errorf("PVC %s/data: denied by another entry than %s: %v; the PVC now (%v): resourceVersion %s, labels %v, annotations %v",
						ns, protectLockedEntry, err, gerr, got.ResourceVersion, got.Labels, got.Annotations)
				}
			default:
				t.Fatalf("deleting PVC %s/data: %v; want the denial %q", ns, err, framework.DenialMessage(l))
			}
		}
		locking += time.Since(lockStart)
	}
	report(t, "Test14 (opt-in, a selector Lock first in each of %d fresh namespaces, PersistentVolumeClaims): %d first Locks (creates and deletes %s of %s), each followed at once by the delete of its PVC: %d denied (%d of them by %s), %d slipped through",
		len(namespaces), 2*iterations, locking.Round(time.Second), time.Since(start).Round(time.Second), denied, denied-notLabelled, protectLockedEntry, slipped)
}

// routedNamespace is a new namespace whose pendingLabel is route (an
// installRoutes key), so that every namespace of one route shares its
// webhook entries.
func routedNamespace(t *testing.T, prefix, route string) string {
	t.Helper()
	ns := kube.NewNamespace(t, prefix)
	if err := kube.Client.Patch(t.Context(), &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{pendingLabel: route}},
	}, client.Merge); err != nil {
		t.Fatal(err)
	}
	return ns
}
