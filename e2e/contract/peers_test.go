package contract_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// TestPeerIdentityLeases runs the identity-Lease view of the peer protocol
// (what the chart's --peer-service does) for two replicas, as lockguard's
// ServiceAccount with the chart's RBAC, on the real API server: each
// creates and renews its Lease and sees the other; a Lease nobody renews
// (a replica that never started, or died without deleting it) is in the
// view for at most the Lease duration; a Lease of another group never is;
// a replica that stops deletes its Lease, and the other drops it at once.
func TestPeerIdentityLeases(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	const ns, group = framework.ServiceAccountNamespace, "lockguard-webhook-test"
	const duration = 6 * time.Second
	const a, b, stuck = "127.0.0.1:10001", "127.0.0.1:10002", "127.0.0.1:1"
	for _, le := range []*coordinationv1.Lease{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: peers.LeaseName(group, stuck), Labels: map[string]string{peers.LeaseGroupLabel: group}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(stuck)}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: peers.LeaseName("someone-else", "127.0.0.1:2"), Labels: map[string]string{peers.LeaseGroupLabel: "someone-else"}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("127.0.0.1:2")}},
	} {
		if err := kube.Client.Create(ctx, le); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), le) })
	}

	saCfg, err := suite.env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	type replica struct {
		mu          sync.Mutex
		views       [][]string
		from, until time.Time
		cancel      context.CancelFunc
		done        chan error
	}
	start := func(self string) *replica {
		r := &replica{done: make(chan error, 1)}
		rctx, cancel := context.WithCancel(ctx)
		r.cancel = cancel
		src := peers.Leases{Client: cs.CoordinationV1(), Namespace: ns, Group: group, Self: self, Duration: duration,
			Fresh: func(from, until time.Time) {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.from, r.until = from, until
			}}
		go func() {
			r.done <- src.Run(rctx, func(v []string) {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.views = append(r.views, v)
			})
		}()
		return r
	}
	wantView := func(r *replica, within time.Duration, want ...string) {
		t.Helper()
		framework.Eventually(t, within, fmt.Sprintf("view %v", want), func(context.Context) error {
			r.mu.Lock()
			defer r.mu.Unlock()
			if len(r.views) == 0 || !slices.Equal(r.views[len(r.views)-1], want) {
				return fmt.Errorf("views so far %v", r.views)
			}
			return nil
		})
	}
	began := time.Now()
	ra, rb := start(a), start(b)
	t.Cleanup(func() { ra.cancel(); rb.cancel() })

	// The stuck Lease counts for one duration from the first list that
	// showed it, then never again; the other group's never does.
	wantView(ra, framework.DefaultTimeout, b)
	wantView(rb, framework.DefaultTimeout, a)
	for _, r := range []*replica{ra, rb} {
		r.mu.Lock()
		first := r.views[0]
		r.mu.Unlock()
		if !slices.Contains(first, stuck) {
			t.Errorf("first view %v lacks the Lease it had not seen expire yet (%s)", first, stuck)
		}
		for _, v := range r.views {
			if slices.Contains(v, "127.0.0.1:2") {
				t.Errorf("a view %v holds another group's Lease", v)
			}
		}
	}
	if took := time.Since(began); took < duration {
		t.Errorf("the stuck Lease left the views %v after the start, before its duration %v", took, duration)
	}

	// Fresh: renewing without a gap, from half a duration after the
	// streak began, until a little after the last renewal.
	framework.Eventually(t, framework.DefaultTimeout, "replica a fresh", func(context.Context) error {
		ra.mu.Lock()
		defer ra.mu.Unlock()
		if now := time.Now(); now.Before(ra.from) || !now.Before(ra.until) {
			return fmt.Errorf("fresh from %v until %v, now %v", ra.from, ra.until, now)
		}
		return nil
	})

	// b stops: its Lease goes, and a drops it well before a duration.
	rb.cancel()
	if err := <-rb.done; err != nil {
		t.Fatalf("b: %v", err)
	}
	var le coordinationv1.Lease
	if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: peers.LeaseName(group, b)}, &le); !apierrors.IsNotFound(err) {
		t.Fatalf("b's Lease after b stopped: %v, want not found", err)
	}
	wantView(ra, duration/2)
	ra.cancel()
	if err := <-ra.done; err != nil {
		t.Fatalf("a: %v", err)
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if !ra.until.IsZero() {
		t.Errorf("a still fresh until %v after it stopped", ra.until)
	}
}
