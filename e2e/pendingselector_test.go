//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// pendingSelectorLabel is the label that Test14SelectorPendingAcrossReplicas's
// selector Locks select, one value per Lock.
const pendingSelectorLabel = "lockguard-e2e-w"

// Test14SelectorPendingAcrossReplicas is Test14PendingAcrossReplicas's
// first part for selector Locks (docs/contract.md rule 15: the same strictness
// right after the Lock's create): a selector Lock, and an empty-selector
// Lock, admitted by other replicas protect what they cover at a replica the
// moment their create returns, though that replica decides from its cache
// alone while warm. In one namespace a webhook configuration of the test's
// own sends Lock creates to replica b and deletes to a, in another the
// reverse, for each of:
//
//   - a selector Lock (pendingSelectorLabel=w-<i>) on Stack w-<i>, which
//     carries that label;
//   - an empty-selector Lock all-<i> and Stack e-<i>; all-<i> is deleted
//     afterwards, and the next Lock created once the replica that decides
//     the namespace's deletes allows a dry-run delete again, so that each
//     denial is the new Lock's alone.
//
// $LOCKGUARD_PENDING_ITERATIONS (default 100) iterations, four deletes
// each, every one denied naming the Lock. Local mode: it sends each
// webhook call to a chosen replica.
func Test14SelectorPendingAcrossReplicas(t *testing.T) {
	ll, a, b, f := threeWarmReplicas(t)

	// As in Test14PendingAcrossReplicas: the suite's object entry skips
	// the test's namespaces, its Lock-create entry (pinned to f) stays.
	unpin := ll.set.Front.Pin(f.Address())
	defer unpin()
	routeAround(t)
	selAB, selBA := newPendingNamespace(t, "pending-sel-ab"), newPendingNamespace(t, "pending-sel-ba")
	allAB, allBA := newPendingNamespace(t, "pending-all-ab"), newPendingNamespace(t, "pending-all-ba")
	installRoutes(t, ll.set.Webhook.CA, map[string][2]*framework.Replica{selAB: {b, a}, selBA: {a, b}, allAB: {b, a}, allBA: {a, b}})

	iterations := pendingIterations(t)
	for i := range iterations {
		for _, ns := range []string{selAB, selBA} {
			o := framework.Object(framework.StackGVK, ns, fmt.Sprintf("w-%d", i))
			o.SetLabels(map[string]string{pendingSelectorLabel: o.GetName()})
			if err := kube.Client.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
		for _, ns := range []string{allAB, allBA} {
			if err := kube.Client.Create(t.Context(), framework.Object(framework.StackGVK, ns, fmt.Sprintf("e-%d", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := confirmations(t, a, b)
	slipped, denied := map[string]int{}, map[string]int{}
	// lockThenDelete creates l and, the moment its create returns, deletes
	// Stack ns/target, which l covers.
	lockThenDelete := func(scope string, l *lockv1alpha1.Lock, target string) {
		t.Helper()
		if err := framework.RetryLockCreate(t.Context(), func(ctx context.Context) error { return kube.Client.Create(ctx, l) }); err != nil {
			t.Fatalf("creating Lock %s/%s: %v", l.Namespace, l.Name, err)
		}
		err := kube.DeleteObject(t.Context(), framework.StackGVK, l.Namespace, target)
		switch {
		case err == nil:
			slipped[scope]++
			t.Errorf("VIOLATION: Stack %s/%s deleted right after the create of %s Lock %s returned", l.Namespace, target, scope, l.Name)
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), framework.DenialMessage(l)):
			denied[scope]++
		default:
			t.Fatalf("deleting Stack %s/%s: %v; want the denial %q", l.Namespace, target, err, framework.DenialMessage(l))
		}
	}
	for i := range iterations {
		target := fmt.Sprintf("w-%d", i)
		for _, ns := range []string{selAB, selBA} {
			sel := lockv1alpha1.LockSelector{MatchLabels: map[string]string{pendingSelectorLabel: target}}
			lockThenDelete("selector", framework.NewSelectorLock(ns, "l-"+target, sel), target)
		}
		target = fmt.Sprintf("e-%d", i)
		for _, ns := range []string{allAB, allBA} {
			l := framework.NewSelectorLock(ns, fmt.Sprintf("all-%d", i), lockv1alpha1.LockSelector{})
			lockThenDelete("{}", l, target)
			if err := kube.Client.Delete(t.Context(), l); err != nil {
				t.Fatalf("deleting Lock %s/%s: %v", ns, l.Name, err)
			}
			if i+1 < iterations {
				next := fmt.Sprintf("e-%d", i+1)
				framework.Eventually(t, time.Minute, fmt.Sprintf("a dry-run delete of Stack %s/%s allowed once Lock %s is deleted", ns, next, l.Name), func(ctx context.Context) error {
					return kube.DeleteObject(ctx, framework.StackGVK, ns, next, client.DryRunAll)
				})
			}
		}
	}
	after := confirmations(t, a, b)
	report(t, "Test14 (selector Locks): %d Lock creates, each followed at once by the delete of an object it covers on the other replica: selector: %d denied, %d slipped through; {}: %d denied, %d slipped through; confirmations by reason over both replicas: marker %.0f, cold %.0f",
		4*iterations, denied["selector"], slipped["selector"], denied["{}"], slipped["{}"],
		after[peers.ReasonMarker]-before[peers.ReasonMarker], after[peers.ReasonCold]-before[peers.ReasonCold])
}
