package peers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

// freshness records what a leaseRunner tells Fresh.
type freshness struct{ from, until time.Time }

// testRunner returns a leaseRunner of replica 127.0.0.1:9443 of group g in
// ns, on a fake clientset and a fake clock, and the Fresh calls it makes.
func testRunner(cs *fake.Clientset, c *clock) (*leaseRunner, *[]freshness) {
	var got []freshness
	l := Leases{Client: cs.CoordinationV1(), Namespace: "ns", Group: "g", Self: "127.0.0.1:9443", Duration: 30 * time.Second, Now: c.Now,
		Fresh: func(from, until time.Time) { got = append(got, freshness{from, until}) }}
	return newLeaseRunner(l), &got
}

// TestLeaseRenewalLostStartsNewStreak: a replica whose own renewal is
// answered NotFound (someone deleted its Lease) or Conflict (someone wrote
// it) starts a new streak, and is cold at once: the others may have
// dropped it from their views meanwhile (issue 36). Renewing again a
// cycle later must not continue the old streak.
func TestLeaseRenewalLostStartsNewStreak(t *testing.T) {
	for name, tc := range map[string]struct {
		reason string
		lose   func(t *testing.T, cs *fake.Clientset)
	}{
		"deleted": {
			reason: "a Lease writer deleted the replica's Lease: the others dropped it from their views",
			lose: func(t *testing.T, cs *fake.Clientset) {
				if err := cs.CoordinationV1().Leases("ns").Delete(context.Background(), LeaseName("g", "127.0.0.1:9443"), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
		},
		"conflict": {
			reason: "a Lease writer changed the replica's Lease (its holder, its labels): the others may have dropped it",
			lose: func(t *testing.T, cs *fake.Clientset) {
				once := false
				cs.PrependReactor("update", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
					if once {
						return false, nil, nil
					}
					once = true
					return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, LeaseName("g", "127.0.0.1:9443"), fmt.Errorf("changed"))
				})
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			c := newClock()
			cs := fake.NewClientset()
			r, got := testRunner(cs, c)
			d := r.tm.duration
			start := c.now
			for range 4 {
				if err := r.cycle(ctx, c.now); err != nil {
					t.Fatal(err)
				}
				c.add(r.tm.renew)
			}
			if from := (*got)[len(*got)-1].from; !from.Equal(start.Add(d / 2)) {
				t.Fatalf("fresh from %v, want the streak's start + D/2 %v", from, start.Add(d/2))
			}
			tc.lose(t, cs)
			if err := r.cycle(ctx, c.now); err == nil {
				t.Fatalf("%s\ncycle after the Lease was lost: nil error", tc.reason)
			}
			if last := (*got)[len(*got)-1]; !last.until.IsZero() && !c.now.Before(last.from) && c.now.Before(last.until) {
				t.Errorf("%s\nstill fresh (%v to %v) at %v after its renewal was refused", tc.reason, last.from, last.until, c.now)
			}
			c.add(r.tm.renew)
			again := c.now
			if err := r.cycle(ctx, c.now); err != nil {
				t.Fatal(err)
			}
			if from := (*got)[len(*got)-1].from; !from.Equal(again.Add(d / 2)) {
				t.Errorf("%s\nfresh from %v after renewing again, want a new streak: %v", tc.reason, from, again.Add(d/2))
			}
		})
	}
}

// TestLeaseHolderAddresses: a Lease's holderIdentity counts in the view
// only as an IP:port (netip), so that no holder injects a path, a query
// or another host into the URL of the replica's calls (issue 36).
func TestLeaseHolderAddresses(t *testing.T) {
	c := newClock()
	cs := fake.NewClientset()
	for i, h := range []string{
		"127.0.0.1:9443", "[::1]:9443",
		"evil:443/anything?", "127.0.0.1:443/x?", "localhost:9443", "127.0.0.1", "127.0.0.1:0",
		"[::1%lo]:443", "127.0.0.1:9443#x", "127.0.0.1:99999", "user@127.0.0.1:9443",
	} {
		le := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("g-%d", i), Namespace: "ns", Labels: map[string]string{LeaseGroupLabel: "g"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(h)},
		}
		if _, err := cs.CoordinationV1().Leases("ns").Create(context.Background(), le, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := testRunner(cs, c)
	if err := r.cycle(context.Background(), c.now); err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1:9443", "[::1]:9443"}
	slices.Sort(want)
	if diff := cmp.Diff(want, r.view(c.now)); diff != "" {
		t.Errorf("view(): -want, +got:\n%s", diff)
	}
}
