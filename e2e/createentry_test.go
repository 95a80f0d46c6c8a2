//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/peers"
)

// Bounds of Test22CreateEntryWatched, generous for a loaded machine:
// coldWithin is how long after a change of the Lock-create entry every
// replica may take to go cold (a watch event, read at the next scrape);
// warmWithin how long after the entry is restored they may take to be warm
// again (the hold-off, 15s in the harness, then a list).
const (
	coldWithin = 30 * time.Second
	warmWithin = 2 * time.Minute
)

// Test22CreateEntryWatched checks that a replica decides from its cache
// only while the Lock-create entry of lockguard's webhook configuration is
// as the chart renders it: relaxing it (failurePolicy Ignore) or removing
// it makes every replica cold, and a Lock created meanwhile without
// lockguard protects its target at once; restored, the replicas are warm
// again only after the hold-off (--pending-ttl). Local mode: it reads the
// replicas' metrics.
func Test22CreateEntryWatched(t *testing.T) {
	ll, ok := s.lg.(*localLockguard)
	if !ok {
		t.Skip("needs the replicas' metrics (local mode)")
	}
	replicaCount(t)
	scale(t, 2)
	reps := ll.set.Replicas()
	waitWarm(t, reps...)

	key := framework.WebhookConfigurationName
	orig := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := s.c.Get(t.Context(), client.ObjectKey{Name: key}, orig); err != nil {
		t.Fatal(err)
	}
	setEntry := func(ctx context.Context, edit func(*admissionregistrationv1.ValidatingWebhookConfiguration)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := s.c.Get(ctx, client.ObjectKey{Name: key}, cur); err != nil {
				return err
			}
			cur.Webhooks = slices.Clone(orig.Webhooks)
			edit(cur)
			return s.c.Update(ctx, cur)
		})
	}
	restore := func(ctx context.Context) error {
		return setEntry(ctx, func(*admissionregistrationv1.ValidatingWebhookConfiguration) {})
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := restore(ctx); err != nil {
			t.Errorf("restoring the webhook configuration: %v", err)
		}
	})

	ns := kube.NewNamespace(t, "entry")
	for i, change := range []struct {
		what string
		edit func(*admissionregistrationv1.ValidatingWebhookConfiguration)
	}{
		{"failurePolicy Ignore", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			ignore := admissionregistrationv1.Ignore
			i := slices.IndexFunc(v.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == peers.CreateEntryName })
			v.Webhooks[i].FailurePolicy = &ignore
		}},
		{"entry removed", func(v *admissionregistrationv1.ValidatingWebhookConfiguration) {
			v.Webhooks = slices.DeleteFunc(v.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == peers.CreateEntryName })
		}},
	} {
		if err := setEntry(t.Context(), change.edit); err != nil {
			t.Fatalf("%s: %v", change.what, err)
		}
		cold := framework.Eventually(t, coldWithin, change.what+": every replica cold", func(ctx context.Context) error {
			return wantWarm(ctx, reps, 0)
		})
		report(t, "%s: every replica cold %s after the update returned (bound %s)", change.what, cold.Round(10*time.Millisecond), coldWithin)

		// A Lock created now may bypass lockguard; its target's delete,
		// sent at once, is confirmed with the API server and denied.
		target := fmt.Sprintf("s%d", i)
		kube.CreateObject(t, framework.StackGVK, ns, target)
		lock := kube.CreateLock(t, framework.NewLock(ns, "l-"+target, "Stack", target, ""))
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, target), lock)

		// Restored, each replica holds off for the TTL from when it saw
		// the entry valid again, which is after start: never warm before
		// start+TTL.
		start := time.Now()
		if err := restore(t.Context()); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, warmWithin, change.what+" undone: every replica warm", func(ctx context.Context) error {
			return wantWarm(ctx, reps, 1)
		})
		warm := time.Since(start)
		if ttl := ll.set.PendingTTL(); warm < ttl {
			t.Fatalf("%s undone: every replica warm %s after the entry was restored; want the hold-off (%s) first", change.what, warm, ttl)
		}
		report(t, "%s undone: every replica warm again %s after the update was sent (hold-off %s, bound %s)", change.what, warm.Round(10*time.Millisecond), ll.set.PendingTTL(), warmWithin)
	}
}

// wantWarm returns nil when every replica of rs reports
// lockguard_replica_warm and lockguard_create_entry_valid equal to v.
func wantWarm(ctx context.Context, rs []*framework.Replica, v float64) error {
	for _, r := range rs {
		m, err := r.Process().Metrics(ctx)
		if err != nil {
			return err
		}
		for _, name := range []string{"lockguard_replica_warm", "lockguard_create_entry_valid"} {
			if got, ok := m[name]; !ok || got != v {
				return fmt.Errorf("%s: %s is %v (reported %v), want %v", r.Name, name, got, ok, v)
			}
		}
	}
	return nil
}
