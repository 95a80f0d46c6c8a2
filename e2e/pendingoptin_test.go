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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// Test14OptIn is Test14PendingAcrossReplicas's first part for a kind of
// another group protected by opt-in (docs/contract.md rule 21; the suite's
// lockguard opts in PersistentVolumeClaims, local_test.go): three
// replicas; in one namespace a webhook configuration of the test's own
// sends Lock creates to replica b, in another to a. The PVC deletes are
// not rerouted: they reach lockguard through the suite's protect entry
// (namespaces labelled core.navique.com/has-locks) or protect-locked entry
// (PVCs labelled core.navique.com/protected, which a targetRef Lock's
// target carries before its create is allowed: issue 40), the front,
// pinned to f, which also admits each create through the suite's
// Lock-create entry. $LOCKGUARD_PENDING_ITERATIONS (default 100)
// iterations, in each namespace a targetRef Lock (apiVersion v1, kind
// PersistentVolumeClaim) on PVC t-<i> (even i) or a selector Lock whose
// kinds name PersistentVolumeClaim on PVC s-<i>, which carries its label
// (odd i); each PVC is deleted the moment its Lock's create returns, and
// every delete must be denied naming the Lock. Each namespace's first Lock
// is a targetRef Lock; Test14OptInSelectorFirst makes it a selector Lock
// in many fresh namespaces (docs/optin.md). The namespaces (their PVCs carry
// kubernetes.io/pvc-protection) must be gone before the test ends (within
// 60 s plus 200 ms per iteration). Local mode only.
func Test14OptIn(t *testing.T) {
	ll, a, b, f := threeWarmReplicas(t)

	// Registered first, so run last: once the namespaces' own cleanups
	// (their Locks, then the namespace) have run, each must be gone. The
	// pvc-protection controller removes the PVCs' finalizers one by one:
	// 500 PVCs took 56 s on 1.37.2 and 101 s on 1.29.15 (2026-12-04).
	var namespaces []string
	iterations := pendingIterations(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), namespaceBound+time.Duration(iterations)*200*time.Millisecond)
		defer cancel()
		for _, ns := range namespaces {
			waitNamespaceGone(ctx, t, ns)
		}
	})
	unpin := ll.set.Front.Pin(f.Address())
	defer unpin()
	routeAround(t)
	nsAB, nsBA := newPendingNamespace(t, "pending-pvc-ab"), newPendingNamespace(t, "pending-pvc-ba")
	namespaces = []string{nsAB, nsBA}
	installRoutes(t, ll.set.Webhook.CA, map[string][2]*framework.Replica{nsAB: {b, a}, nsBA: {a, b}})

	// pvcName is iteration i's PVC: t-<i> for a targetRef Lock (even i),
	// s-<i> for a selector Lock (odd i).
	pvcName := func(i int) string {
		if i%2 == 0 {
			return fmt.Sprintf("t-%d", i)
		}
		return fmt.Sprintf("s-%d", i)
	}
	for i := range iterations {
		for _, ns := range namespaces {
			pvc := newPVC(ns, pvcName(i))
			pvc.Labels = map[string]string{pendingSelectorLabel: pvc.Name}
			if err := kube.Client.Create(t.Context(), pvc); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := confirmations(t, a, b)
	slipped, denied := map[string]int{}, map[string]int{}
	lockThenDelete := func(scope string, l *lockv1alpha1.Lock, target string) {
		t.Helper()
		if err := framework.RetryLockCreate(t.Context(), func(ctx context.Context) error { return kube.Client.Create(ctx, l) }); err != nil {
			t.Fatalf("creating Lock %s/%s: %v", l.Namespace, l.Name, err)
		}
		err := kube.Client.Delete(t.Context(), newPVC(l.Namespace, target))
		switch {
		case err == nil:
			slipped[scope]++
			t.Errorf("VIOLATION: PVC %s/%s deleted right after the create of %s Lock %s returned", l.Namespace, target, scope, l.Name)
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), framework.DenialMessage(l)):
			denied[scope]++
		default:
			t.Fatalf("deleting PVC %s/%s: %v; want the denial %q", l.Namespace, target, err, framework.DenialMessage(l))
		}
	}
	start := time.Now()
	for i := range iterations {
		for _, ns := range namespaces {
			target := pvcName(i)
			if i%2 == 0 {
				l := framework.NewLock(ns, "l-"+target, "PersistentVolumeClaim", target, "")
				l.Spec.TargetRef.APIVersion = "v1"
				lockThenDelete("targetRef", l, target)
				continue
			}
			lockThenDelete("selector", framework.NewSelectorLock(ns, "l-"+target, lockv1alpha1.LockSelector{
				MatchLabels: map[string]string{pendingSelectorLabel: target}, Kinds: []string{"PersistentVolumeClaim"}}), target)
		}
	}
	after := confirmations(t, a, b)
	report(t, "Test14 (opt-in, PersistentVolumeClaims): %d Lock creates in %s, each followed at once by the delete of its PVC on the other replica: targetRef: %d denied, %d slipped through; selector (kinds PersistentVolumeClaim): %d denied, %d slipped through; confirmations by reason over both replicas: marker %.0f, cold %.0f",
		2*iterations, time.Since(start).Round(time.Second), denied["targetRef"], slipped["targetRef"], denied["selector"], slipped["selector"],
		after[peers.ReasonMarker]-before[peers.ReasonMarker], after[peers.ReasonCold]-before[peers.ReasonCold])
}

// newPVC returns a PersistentVolumeClaim ns/name of 1Gi, not yet created.
func newPVC(ns, name string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
}

// waitNamespaceGone deletes namespace ns (the delete is refused while the
// replicas still see a Lock there) and fails t unless it is gone before
// ctx ends, naming the conditions that hold it. It runs in a cleanup,
// where t.Context() (and so framework.Eventually) is done.
func waitNamespaceGone(ctx context.Context, t *testing.T, ns string) {
	t.Helper()
	start := time.Now()
	for {
		err := namespaceGone(ctx, ns)
		if err == nil {
			t.Logf("namespace %s gone %s after the test's end", ns, time.Since(start).Round(100*time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			t.Errorf("namespace %s not gone after %s: %v", ns, time.Since(start).Round(time.Second), err)
			return
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// namespaceGone deletes namespace ns and returns nil once it is gone, or
// an error naming what holds it.
func namespaceGone(ctx context.Context, ns string) error {
	if err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	var n corev1.Namespace
	err := kube.Client.Get(ctx, client.ObjectKey{Name: ns}, &n)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var held []string
	for _, c := range n.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			held = append(held, c.Message)
		}
	}
	return fmt.Errorf("namespace %s is %s: %s", ns, n.Status.Phase, strings.Join(held, "; "))
}
