//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// Test14IdentityLeases checks the membership of the peer protocol
// (internal/peers.Leases) with two replicas of the binary: a replica
// counts only while it renews its identity Lease, so
//
//   - a Lease that nobody renews (a replica that died without deleting
//     it, or one whose process never got past its first write) stops Lock
//     creates for at most about one --peer-identity-lease after the
//     replicas first list it, and is then deleted by a replica;
//   - a replica whose process is frozen (SIGSTOP, as a pod stuck on a
//     node) stops them for at most about the larger of the subscription
//     lease (10s) and one --peer-identity-lease, while it stays frozen;
//     thawed, it is cold, then warm again.
//
// A replica that never started holds no Lease and is never waited for.
// Local mode: it needs the replicas' processes.
func Test14IdentityLeases(t *testing.T) {
	ll, ok := s.lg.(*localLockguard)
	if !ok {
		t.Skip("needs the replicas' processes (local mode)")
	}
	replicaCount(t)
	scale(t, 2)
	reps := ll.set.Replicas()
	a, b := reps[0], reps[1]
	waitWarm(t, a, b)
	d := ll.set.IdentityLease()
	ns := kube.NewNamespace(t, "identity")
	kube.CreateObject(t, framework.StackGVK, ns, "s")
	kube.CreateObject(t, framework.StackGVK, ns, "frozen-target")

	// refusedFor creates Locks until one is allowed after at least one
	// refusal (or none is refused for a while), and returns how long after
	// since the creates were refused.
	n := 0
	refusedFor := func(since time.Time, within time.Duration) (first, last time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		refused := false
		for time.Now().Before(deadline) {
			n++
			l := framework.NewLock(ns, fmt.Sprintf("l-%d", n), "Stack", "s", "")
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			err := kube.Client.Create(ctx, l)
			cancel()
			switch {
			case err == nil && refused:
				return first, last
			case err == nil && time.Since(since) > 2*d:
				t.Fatalf("no Lock create refused within %v of %v", 2*d, since)
			case err != nil && !apierrors.IsServiceUnavailable(err):
				t.Fatalf("creating Lock %s: %v; want allowed or refused retryably", l.Name, err)
			case err != nil:
				if !refused {
					first = time.Since(since)
				}
				refused, last = true, time.Since(since)
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("Lock creates still refused %v after %v", within, since)
		return 0, 0
	}

	// A Lease nobody renews, for a loopback port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	ln.Close()
	group := ll.set.LeaseGroup()
	now := metav1.NewMicroTime(time.Now())
	stale := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: lockguardNamespace, Name: peers.LeaseName(group, dead), Labels: map[string]string{peers.LeaseGroupLabel: group}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(dead), LeaseDurationSeconds: ptr.To(int32(d / time.Second)),
			AcquireTime: &now, RenewTime: &now},
	}
	created := time.Now()
	if err := kube.Client.Create(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), stale) })
	first, last := refusedFor(created, 4*d)
	report(t, "Test14IdentityLeases: a Lease nobody renews (--peer-identity-lease %v): Lock creates refused from %v to %v after its create", d, first.Round(100*time.Millisecond), last.Round(100*time.Millisecond))
	// Bound: the replicas list the Leases every d/6 and drop one d after
	// the list that first showed it; each call takes at most d/10.
	if bound := d + d/6 + d/10 + 2*time.Second; last > bound {
		t.Errorf("Lock creates refused for %v after the stuck Lease appeared, over %v", last, bound)
	}
	framework.Eventually(t, 3*d+2*framework.DefaultTimeout, "the stuck Lease collected", func(ctx context.Context) error {
		err := kube.Client.Get(ctx, client.ObjectKeyFromObject(stale), &coordinationv1.Lease{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	waitWarm(t, a, b)

	// b frozen: its subscription to a and its Lease stop being renewed.
	pid := b.Process().Pid()
	frozen := time.Now()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thaw := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(thaw)
	first, last = refusedFor(frozen, 4*d+peers.DefaultLease)
	report(t, "Test14IdentityLeases: replica b frozen (SIGSTOP): Lock creates refused from %v to %v after it froze", first.Round(100*time.Millisecond), last.Round(100*time.Millisecond))
	if bound := max(peers.DefaultLease, d+d/6+d/10) + 2*time.Second; last > bound {
		t.Errorf("Lock creates refused for %v after replica b froze, over %v", last, bound)
	}
	// Still frozen: creates go on.
	if err := framework.RetryLockCreate(t.Context(), func(ctx context.Context) error {
		return kube.Client.Create(ctx, framework.NewLock(ns, "while-frozen", "Stack", "frozen-target", ""))
	}); err != nil {
		t.Fatalf("a Lock create with replica b frozen: %v", err)
	}
	thaw()
	waitWarm(t, a, b)
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "frozen-target"), framework.NewLock(ns, "while-frozen", "Stack", "frozen-target", ""))
}
