//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// quietMinute is how long Test13StatusTruthAndQuietMinute counts
// lockguard's writes in a steady cluster.
const quietMinute = time.Minute

// leaseRenewals bounds the PUTs of a quiet minute by replicas replicas:
// the leader renews its Lease every retry period (2s) and every replica
// its identity Lease every sixth of --peer-identity-lease (1s at the
// harness's 6s, 5s at the chart's 30s); nothing else lockguard does is a
// PUT.
func leaseRenewals(replicas int) int {
	return int(quietMinute/(2*time.Second)) + 3 + replicas*(int(quietMinute/time.Second)+3)
}

// staleIdentityLeases returns the identity Leases (internal/peers) whose
// holders stopped renewing them: a replica deletes such a Lease (a write)
// three Lease durations after it stopped changing.
func staleIdentityLeases(ctx context.Context) ([]string, error) {
	var list coordinationv1.LeaseList
	if err := s.c.List(ctx, &list, client.HasLabels{peers.LeaseGroupLabel}); err != nil {
		return nil, err
	}
	var stale []string
	for _, le := range list.Items {
		if le.Spec.RenewTime == nil || le.Spec.LeaseDurationSeconds == nil ||
			time.Since(le.Spec.RenewTime.Time) > time.Duration(*le.Spec.LeaseDurationSeconds)*time.Second {
			stale = append(stale, le.Namespace+"/"+le.Name)
		}
	}
	return stale, nil
}

// writeMethods are the methods of lockguard's requests that change
// something and that a steady cluster must not see at all: annotation and
// status patches, Events (POST, and PATCH for a series), deletes.
var writeMethods = []string{"PATCH", "POST", "DELETE"}

// requestsByMethod sums rest_client_requests_total by method over every
// running replica.
func requestsByMethod(ctx context.Context) (map[string]int, error) {
	rs, err := s.lg.Replicas(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, r := range rs {
		m, err := r.Metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", r.Name(), err)
		}
		for sample, v := range m {
			if !strings.HasPrefix(sample, "rest_client_requests_total{") {
				continue
			}
			_, after, _ := strings.Cut(sample, `method="`)
			method, _, _ := strings.Cut(after, `"`)
			out[method] += int(v)
		}
	}
	return out, nil
}

// Test13StatusTruthAndQuietMinute (docs/contract.md rule 13, issue 11): with a
// steady mix of valid, misspelled, missing and invalid Locks in several
// namespaces, every Lock's status tells the truth (framework
// CheckLockStatusTruth: Active means a dry-run DELETE of the target is
// denied), and over a quiet minute lockguard writes nothing: no PATCH,
// POST or DELETE (Events included) in its own rest_client_requests_total,
// and no more PUTs than its Lease renewals.
func Test13StatusTruthAndQuietMinute(t *testing.T) {
	ctx := t.Context()
	var namespaces []string
	locks := 0
	for i := range 3 {
		ns := kube.NewNamespace(t, fmt.Sprintf("quiet%d", i))
		namespaces = append(namespaces, ns)
		locks += len(kube.CreateLockMix(t, ns))
	}
	framework.Eventually(t, framework.DefaultTimeout, "every Lock's status written and true", func(ctx context.Context) error {
		return kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: namespaces})
	})
	if _, err := requestsByMethod(ctx); err != nil {
		t.Skipf("the quiet minute needs lockguard's metrics: %v", err)
	}
	// Namespaces of earlier tests still being deleted make lockguard write.
	framework.Eventually(t, 3*time.Minute, "no namespace terminating", func(ctx context.Context) error {
		var list corev1.NamespaceList
		if err := s.c.List(ctx, &list); err != nil {
			return err
		}
		for _, n := range list.Items {
			if n.Status.Phase == corev1.NamespaceTerminating {
				return fmt.Errorf("namespace %s is terminating", n.Name)
			}
		}
		return nil
	})
	writes := func(m map[string]int) (n int) {
		for _, method := range writeMethods {
			n += m[method]
		}
		return n
	}
	// Settled: no write for framework.SettleQuiet.
	last, lastChange := -1, time.Now()
	framework.Eventually(t, framework.DefaultTimeout, "lockguard settles", func(ctx context.Context) error {
		m, err := requestsByMethod(ctx)
		if err != nil {
			return err
		}
		if w := writes(m); w != last {
			last, lastChange = w, time.Now()
		}
		if d := time.Since(lastChange); d < framework.SettleQuiet {
			return fmt.Errorf("quiet for %s only (%v)", d, m)
		}
		if stale, err := staleIdentityLeases(ctx); err != nil || len(stale) > 0 {
			return fmt.Errorf("identity Leases of replicas gone, still to be collected: %v %v", stale, err)
		}
		return nil
	})
	rs, err := s.lg.Replicas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	renewals := leaseRenewals(len(rs))
	before, err := requestsByMethod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	framework.Consistently(t, quietMinute, "lockguard writes nothing over a quiet minute", func(ctx context.Context) error {
		m, err := requestsByMethod(ctx)
		if err != nil {
			return err
		}
		for _, method := range writeMethods {
			if d := m[method] - before[method]; d != 0 {
				return fmt.Errorf("%d %s requests after %s of a quiet minute (requests by method before %v, now %v); %s", d, method, time.Since(start).Round(time.Second), before, m, lockguardWrites(start))
			}
		}
		if d := m["PUT"] - before["PUT"]; d > renewals {
			return fmt.Errorf("%d PUT requests after %s, more than the Lease renewals (%d); %s", d, time.Since(start).Round(time.Second), renewals, lockguardWrites(start))
		}
		return nil
	})
	after, err := requestsByMethod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	delta := map[string]int{}
	for method, n := range after {
		delta[method] = n - before[method]
	}
	report(t, "lockguard's requests over a quiet %s with %d Locks in %d namespaces, by method: %v", quietMinute, locks, len(namespaces), delta)
	if err := kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: namespaces}); err != nil {
		t.Errorf("docs/contract.md rule 13 after the quiet minute:\n%v", err)
	}
}
