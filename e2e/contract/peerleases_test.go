package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// TestPeerLeasesOnlyLockguard: only lockguard's ServiceAccount may create,
// update or delete the identity Leases of its replicas (issue 36): a user
// bound to the built-in edit ClusterRole in the release namespace is
// refused, with the chart's message, by the webhook entry
// peer-leases.lockguard.core.navique.com (the suite's install, as on 1.29)
// and, where the API server serves admissionregistration.k8s.io/v1
// policies, by the chart's ValidatingAdmissionPolicy; the same user's
// writes of other Leases (another controller's leader election) and
// lockguard's own writes of its Leases are allowed.
func TestPeerLeasesOnlyLockguard(t *testing.T) {
	inProcess(t)
	t.Run("webhook", func(t *testing.T) {
		sa, err := suite.env.ServiceAccountConfig()
		if err != nil {
			t.Fatal(err)
		}
		checkPeerLeases(t, framework.ServiceAccountNamespace, sa)
	})
	t.Run("policy", func(t *testing.T) {
		skipWithoutPolicies(t)
		// The chart for another release namespace, rendered as for a 1.30+
		// API server: its ServiceAccount, Role and the policy only (the
		// suite's webhook entry matches the suite's namespace alone).
		const ns = "lockguard-peerleases"
		objs, err := framework.Render(t.Context(), framework.Release{Name: "lg-pl", Namespace: ns,
			APIVersions: []string{"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}})
		if err != nil {
			t.Fatal(err)
		}
		var apply []*unstructured.Unstructured
		saName := ""
		for _, o := range objs {
			switch o.GetKind() {
			case "ServiceAccount":
				saName = o.GetName()
			case "Role", "RoleBinding":
			case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				if !slices.Contains([]string{"lg-pl-lockguard-peer-leases"}, o.GetName()) {
					continue
				}
			default:
				continue
			}
			apply = append(apply, o)
		}
		if saName == "" || len(apply) != 5 {
			t.Fatalf("rendered %d of ServiceAccount, Role, RoleBinding and the peer-leases policy and binding, want 5", len(apply))
		}
		if err := client.IgnoreAlreadyExists(kube.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			t.Fatal(err)
		}
		if err := framework.Apply(t.Context(), kube.Client, apply...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, o := range apply {
				if o.GetNamespace() == "" {
					_ = kube.Client.Delete(context.Background(), o)
				}
			}
		})
		user := "system:serviceaccount:" + ns + ":" + saName
		sa, err := suite.env.UserConfig(user, "system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
		if err != nil {
			t.Fatal(err)
		}
		checkPeerLeases(t, ns, sa)
	})
}

// checkPeerLeases checks the Lease rule in ns, where lockguard's
// ServiceAccount authenticates with sa.
func checkPeerLeases(t *testing.T, ns string, sa *rest.Config) {
	t.Helper()
	ctx := t.Context()
	lg := clientFor(t, sa)
	editor := kube.EditUser(t, suite.env.Config, ns, "peerleases-editor", &coordinationv1.LeaseList{})
	want := peers.LeaseGuardMessage(ns)
	const group = "lockguard-webhook"
	identity := func(addr string) *coordinationv1.Lease {
		return &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: peers.LeaseName(group, addr), Labels: map[string]string{peers.LeaseGroupLabel: group}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(addr)},
		}
	}
	// lockguard creates and renews its Lease.
	own := identity("127.0.0.1:10101")
	if err := lg.Create(ctx, own); err != nil {
		t.Fatalf("lockguard creating its identity Lease: %v", err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), own) })
	own.Spec.RenewTime = ptr.To(metav1.NowMicro())
	if err := lg.Update(ctx, own); err != nil {
		t.Fatalf("lockguard renewing its identity Lease: %v", err)
	}

	refused := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("%s as an edit user: allowed, want refused", what)
			return
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s as an edit user: %v\nwant forbidden with %q", what, err, want)
		}
	}
	// The policy takes effect once the API server's policy cache has it:
	// probe with dry runs, which admission sees as the real thing.
	framework.Eventually(t, framework.DefaultTimeout, "the edit user's delete of an identity Lease refused", func(ctx context.Context) error {
		err := editor.Delete(ctx, own.DeepCopy(), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("a dry-run delete allowed: the rule is not in force (or missing)")
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			return err
		}
		return nil
	})
	refused("deleting lockguard's identity Lease", editor.Delete(ctx, own.DeepCopy()))
	refused("deleting every identity Lease", editor.DeleteAllOf(ctx, &coordinationv1.Lease{}, client.InNamespace(ns), client.MatchingLabels{peers.LeaseGroupLabel: group}))
	if err := editor.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
		t.Fatal(err)
	}
	changed := own.DeepCopy()
	changed.Spec.HolderIdentity = ptr.To("127.0.0.1:10102")
	refused("changing an identity Lease's holder", editor.Update(ctx, changed))
	unlabelled := own.DeepCopy()
	delete(unlabelled.Labels, peers.LeaseGroupLabel)
	refused("taking an identity Lease out of the group", editor.Update(ctx, unlabelled))
	refused("creating an identity Lease", editor.Create(ctx, identity("127.0.0.1:10103")))

	// Other Leases are the edit user's to write, as before.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "some-controller-leader"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("some-controller")}}
	if err := editor.Create(ctx, other); err != nil {
		t.Fatalf("an edit user creating another controller's Lease: %v", err)
	}
	other.Spec.RenewTime = ptr.To(metav1.NowMicro())
	if err := editor.Update(ctx, other); err != nil {
		t.Errorf("an edit user renewing another controller's Lease: %v", err)
	}
	if err := editor.Delete(ctx, other); err != nil {
		t.Errorf("an edit user deleting another controller's Lease: %v", err)
	}
	// lockguard deletes its Lease as it stops.
	if err := lg.Delete(ctx, own); err != nil {
		t.Errorf("lockguard deleting its identity Lease: %v", err)
	}
}

// clientFor returns a client of cfg with the suite's scheme.
func clientFor(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestPeerIdentityLeaseDeletedByAdmin: a cluster admin (whom the chart's
// rule does not stop) deletes a replica's identity Lease; the replica,
// whose next renewal is answered NotFound, stops counting as a replica at
// once and starts a new streak: fresh again only half a Lease duration
// after it created its Lease anew (Tracker.SelfFresh then holds it cold
// for the TTL), never as if its renewals had gone on (issue 36).
func TestPeerIdentityLeaseDeletedByAdmin(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	const ns, group, self = framework.ServiceAccountNamespace, "lockguard-webhook-deleted", "127.0.0.1:10201"
	const duration = 6 * time.Second
	saCfg, err := suite.env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(saCfg)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu          sync.Mutex
		from, until time.Time
		cold        bool
	)
	l := peers.Leases{Client: cs.CoordinationV1(), Namespace: ns, Group: group, Self: self, Duration: duration,
		Fresh: func(f, u time.Time) {
			mu.Lock()
			defer mu.Unlock()
			from, until = f, u
			cold = cold || f.IsZero()
		}}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(rctx, func([]string) {}) }()
	t.Cleanup(func() { cancel(); <-done })
	fresh := func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if now := time.Now(); now.Before(from) || !now.Before(until) {
			return fmt.Errorf("fresh from %v until %v, now %v", from, until, now)
		}
		return nil
	}
	framework.Eventually(t, framework.DefaultTimeout, "the replica fresh", fresh)
	mu.Lock()
	first := from
	mu.Unlock()

	le := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: peers.LeaseName(group, self)}}
	if err := kube.Client.Delete(ctx, le); err != nil {
		t.Fatalf("the admin deleting the identity Lease: %v", err)
	}
	deleted := time.Now()
	framework.Eventually(t, framework.DefaultTimeout, "the replica cold once its renewal is answered NotFound", func(context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		if !cold {
			return fmt.Errorf("still fresh from %v until %v", from, until)
		}
		return nil
	})
	framework.Eventually(t, framework.DefaultTimeout, "the replica fresh again", fresh)
	mu.Lock()
	defer mu.Unlock()
	if from.Equal(first) || from.Before(deleted.Add(duration/2)) {
		t.Errorf("fresh again from %v (first streak from %v, Lease deleted at %v): want a new streak, from at least %v", from, first, deleted, deleted.Add(duration/2))
	}
}

// skipWithoutPolicies skips t unless the API server serves
// admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (1.30+):
// before, the chart's webhook entries decide what its policies would.
func skipWithoutPolicies(t *testing.T) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	if rl, err := dc.ServerResourcesForGroupVersion("admissionregistration.k8s.io/v1"); err != nil ||
		!slices.ContainsFunc(rl.APIResources, func(r metav1.APIResource) bool { return r.Kind == "ValidatingAdmissionPolicy" }) {
		t.Skip("the API server serves no admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy (before 1.30): the webhook entry does it")
	}
}
