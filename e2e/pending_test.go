//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
	"github.com/navique/lockguard/webhook"
)

// pendingLabel marks the namespaces of Test14 whose Lock creates and
// deletes go to chosen replicas, not through the front.
const pendingLabel = "lockguard-e2e-pending"

// pendingIterations is how many Locks Test14 creates per direction, each
// followed at once by the delete of its target on the other replica:
// $LOCKGUARD_PENDING_ITERATIONS, default 100.
func pendingIterations(t *testing.T) int {
	n, err := strconv.Atoi(envOr("LOCKGUARD_PENDING_ITERATIONS", "100"))
	if err != nil || n < 1 {
		t.Fatalf("LOCKGUARD_PENDING_ITERATIONS=%q: want a positive integer", os.Getenv("LOCKGUARD_PENDING_ITERATIONS"))
	}
	return n
}

// Test14PendingAcrossReplicas checks the peer protocol (internal/peers)
// with three replicas of the binary: a Lock admitted by others protects
// its target at a replica the moment its create returns, though that
// replica decides from its cache alone while warm; a Lock create is refused,
// retryably, while a replica that must be told is unreachable, and allowed
// again once it has left; a new replica is cold until it has subscribed
// and listed. Local mode: it sends each webhook call to a chosen replica.
func Test14PendingAcrossReplicas(t *testing.T) {
	ll, a, b, f := threeWarmReplicas(t)

	// The suite's object entry skips the test's namespaces; a
	// configuration of the test's own sends, in one namespace, Lock
	// creates to b and deletes to a, and in another the reverse. The
	// suite's Lock-create entry stays as rendered (relaxed, it would make
	// every replica cold: Test22), so each create also goes through the
	// front, pinned to the third replica f: the replica that decides a
	// delete never admitted its Lock itself, and knows of it only from the
	// others.
	unpin := ll.set.Front.Pin(f.Address())
	routeAround(t)
	nsAB := newPendingNamespace(t, "pending-ab")
	nsBA := newPendingNamespace(t, "pending-ba")
	installRoutes(t, ll.set.Webhook.CA, map[string][2]*framework.Replica{nsAB: {b, a}, nsBA: {a, b}})

	iterations := pendingIterations(t)
	for _, ns := range []string{nsAB, nsBA} {
		objs := make([]client.Object, 0, iterations)
		for i := range iterations {
			objs = append(objs, framework.Object(framework.StackGVK, ns, fmt.Sprintf("w-%d", i)))
		}
		for _, o := range objs {
			if err := kube.Client.Create(t.Context(), o); err != nil {
				t.Fatal(err)
			}
		}
	}
	before := confirmations(t, a, b)
	frontConns := ll.set.Front.Conns.Load()
	slipped, denied := 0, 0
	for i := range iterations {
		for _, ns := range []string{nsAB, nsBA} {
			target := fmt.Sprintf("w-%d", i)
			l := framework.NewLock(ns, "l-"+target, "Stack", target, "")
			if err := framework.RetryLockCreate(t.Context(), func(ctx context.Context) error { return kube.Client.Create(ctx, l) }); err != nil {
				t.Fatalf("creating Lock %s/%s: %v", ns, l.Name, err)
			}
			err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, target)
			switch {
			case err == nil:
				slipped++
				t.Errorf("VIOLATION: Stack %s/%s deleted right after its Lock's create returned", ns, target)
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), framework.DenialMessage(l)):
				denied++
			default:
				t.Fatalf("deleting Stack %s/%s: %v; want the denial %q", ns, target, err, framework.DenialMessage(l))
			}
		}
	}
	unpin()
	after := confirmations(t, a, b)
	report(t, "Test14: %d Lock creates, each followed at once by the delete of its target on the other replica: %d denied, %d slipped through; confirmations by reason over both replicas: marker %.0f, cold %.0f; connections through the front (the suite's Lock-create entry, pinned to a third replica): %d",
		2*iterations, denied, slipped, after[peers.ReasonMarker]-before[peers.ReasonMarker], after[peers.ReasonCold]-before[peers.ReasonCold], ll.set.Front.Conns.Load()-frontConns)

	// b unreachable: a refuses Lock creates, retryably, naming b.
	ns := kube.NewNamespace(t, "pending-down")
	kube.CreateObject(t, framework.StackGVK, ns, "s")
	b.Kill(0)
	var refused error
	framework.Eventually(t, time.Minute, "a Lock create refused while replica b is down", func(ctx context.Context) error {
		l := framework.NewLock(ns, "refused", "Stack", "s", "")
		err := kube.Client.Create(ctx, l)
		if err == nil {
			_ = kube.Client.Delete(ctx, l)
			return fmt.Errorf("created while %s is down", b.Address())
		}
		refused = err
		return nil
	})
	if msg := refused.Error(); !strings.Contains(msg, b.Address()) || !strings.Contains(msg, "retry") || !apierrors.IsServiceUnavailable(refused) {
		t.Fatalf("refused create: %v (reason %s); want ServiceUnavailable naming %s and saying retry", refused, apierrors.ReasonForError(refused), b.Address())
	}
	t.Logf("refused while b is down: %v", refused)
	// b leaves (its pod is deleted): creates work again.
	if err := b.Delete(); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, time.Minute, "Lock creates allowed once replica b has left", func(ctx context.Context) error {
		return kube.Client.Create(ctx, framework.NewLock(ns, "after-b", "Stack", "s", ""))
	})

	// A new replica: cold when it becomes ready, warm once it has
	// subscribed, waited out its hold-off and listed.
	scale(t, 3)
	var c *framework.Replica
	for _, r := range ll.set.Replicas() {
		if r != a && r != f {
			c = r
		}
	}
	if warm := replicaWarm(t, c); warm {
		t.Fatalf("replica %s is warm as soon as it is ready; want cold for its hold-off", c.Name)
	}
	waitWarm(t, a, f, c)
	framework.Eventually(t, time.Minute, "Lock creates allowed with the new replica subscribed", func(ctx context.Context) error {
		return kube.Client.Create(ctx, framework.NewLock(ns, "after-c", "Stack", "s", ""))
	})
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "s"), framework.NewLock(ns, "after-b", "Stack", "s", ""), framework.NewLock(ns, "after-c", "Stack", "s", ""))
}

// threeWarmReplicas scales the local lockguard to three replicas, waits
// until all are warm and starts leaseDeleter; Test14's tests send the Lock
// creates to b and deletes to a (and the reverse), the front to f. It
// skips t in cluster mode.
func threeWarmReplicas(t *testing.T) (ll *localLockguard, a, b, f *framework.Replica) {
	t.Helper()
	ll, ok := s.lg.(*localLockguard)
	if !ok {
		t.Skip("needs the replicas' own addresses (local mode)")
	}
	replicaCount(t)
	scale(t, 3)
	reps := ll.set.Replicas()
	a, b, f = reps[0], reps[1], reps[2]
	waitWarm(t, a, b, f)
	leaseDeleter(t)
	return ll, a, b, f
}

// replicaWarm reads lockguard_replica_warm of r.
func replicaWarm(t *testing.T, r *framework.Replica) bool {
	t.Helper()
	m, err := r.Process().Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return m["lockguard_replica_warm"] == 1
}

// waitWarm waits until every replica of rs is warm.
func waitWarm(t *testing.T, rs ...*framework.Replica) {
	t.Helper()
	for _, r := range rs {
		framework.Eventually(t, 2*time.Minute, r.Name+" warm", func(ctx context.Context) error {
			m, err := r.Process().Metrics(ctx)
			if err != nil {
				return err
			}
			if m["lockguard_replica_warm"] != 1 {
				return fmt.Errorf("%s is cold", r.Name)
			}
			return nil
		})
	}
}

// confirmations sums lockguard_confirmations_total by reason over rs.
func confirmations(t *testing.T, rs ...*framework.Replica) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range rs {
		m, err := r.Process().Metrics(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		for _, reason := range []string{peers.ReasonMarker, peers.ReasonCold} {
			out[reason] += m[fmt.Sprintf("lockguard_confirmations_total{reason=%q}", reason)]
		}
	}
	return out
}

// newPendingNamespace is a namespace with pendingLabel.
func newPendingNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := kube.NewNamespace(t, prefix)
	if err := kube.Client.Patch(t.Context(), &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{pendingLabel: ns}},
	}, client.Merge); err != nil {
		t.Fatal(err)
	}
	return ns
}

// suiteWebhooks returns the suite's webhook configuration.
func suiteWebhooks(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	var list admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := kube.Client.List(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		for _, w := range list.Items[i].Webhooks {
			if w.Name == s.webhookName {
				return &list.Items[i]
			}
		}
	}
	t.Fatal("no webhook configuration holds " + s.webhookName)
	return nil
}

// objectEntries returns the object guard's and the Lock CREATE entries of
// vwc.
func objectEntries(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) []*admissionregistrationv1.ValidatingWebhook {
	var out []*admissionregistrationv1.ValidatingWebhook
	for i := range vwc.Webhooks {
		if u := vwc.Webhooks[i].ClientConfig.URL; u != nil && (strings.HasSuffix(*u, webhook.Path) && vwc.Webhooks[i].Name == s.webhookName || strings.HasSuffix(*u, webhook.CreatePath)) {
			out = append(out, &vwc.Webhooks[i])
		}
	}
	return out
}

// routeAround makes the suite's object entry skip the namespaces with
// pendingLabel, until the test ends. The Lock CREATE entry is left as
// rendered: the replicas are warm only while it is.
func routeAround(t *testing.T) {
	t.Helper()
	vwc := suiteWebhooks(t)
	orig := vwc.DeepCopy()
	entries := objectEntries(vwc)
	if len(entries) != 2 {
		t.Fatalf("the suite's webhook configuration has %d object and Lock CREATE entries, want 2", len(entries))
	}
	for _, w := range entries {
		if w.Name == peers.CreateEntryName {
			continue
		}
		w.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: pendingLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	}
	if err := kube.Client.Update(t.Context(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(orig), cur); err != nil {
			t.Errorf("restoring the suite's webhook configuration: %v", err)
			return
		}
		cur.Webhooks = orig.Webhooks
		if err := kube.Client.Update(ctx, cur); err != nil {
			t.Errorf("restoring the suite's webhook configuration: %v", err)
		}
	})
}

// installRoutes installs a webhook configuration that sends, for each
// namespace, its Lock creates to route[0] and its deletes to route[1].
func installRoutes(t *testing.T, ca []byte, routes map[string][2]*framework.Replica) {
	t.Helper()
	base := objectEntries(suiteWebhooks(t))
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "e2e-pending-routes"}}
	n := 0
	for ns, route := range routes {
		for _, e := range base {
			w := *e.DeepCopy()
			create := strings.HasSuffix(*w.ClientConfig.URL, webhook.CreatePath)
			r, path := route[1], webhook.Path
			if create {
				r, path = route[0], webhook.CreatePath
			}
			url := "https://" + r.Address() + path
			n++
			w.Name = fmt.Sprintf("r%d.pending.e2e.lockguard.core.navique.com", n)
			w.ClientConfig.URL, w.ClientConfig.CABundle = &url, ca
			w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{pendingLabel: ns}}
			vwc.Webhooks = append(vwc.Webhooks, w)
		}
	}
	if err := kube.Client.Create(t.Context(), vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = kube.Client.Delete(ctx, vwc)
	})
}
