package measure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// NamespaceGuardResult is the namespace guard's decision time (issue 12,
// docs/contract.md rule 11): server-side dry-run DELETEs of namespaces through
// the API server, one at a time, interleaved.
type NamespaceGuardResult struct {
	// Locks is the number of Locks in each guarded namespace.
	Locks int
	// Unguarded: a namespace with no Lock, which the webhook entry's
	// objectSelector does not send to lockguard (the baseline).
	Unguarded Latencies
	// Denied: a namespace with Locks on existing Stacks, denied.
	Denied Latencies
	// Allowed: a namespace whose Locks all target missing Stacks, allowed
	// with a warning once every target is checked.
	Allowed Latencies
	// Wrong counts answers other than the expected ones; FirstWrong is the
	// first.
	Wrong      int
	FirstWrong string
}

// Namespaces of the namespace guard's benchmark.
const (
	nsGuardDenied    = "bn-locked"
	nsGuardAllowed   = "bn-missing"
	nsGuardUnguarded = "bn-none"
)

// benchNamespaceGuard measures the namespace guard of the lockguard
// serving on wh at locks Locks per namespace, deletes dry-run deletes of
// each namespace: it installs the chart's namespace webhook entry alone,
// pointing at wh.
func (c *Cluster) benchNamespaceGuard(ctx context.Context, wh *framework.LocalWebhook, locks, deletes int) (*NamespaceGuardResult, error) {
	vwc, err := wh.WebhookConfiguration(ctx)
	if err != nil {
		return nil, err
	}
	vwc.Name, vwc.Annotations = "bench-nsguard", nil
	vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return !strings.HasPrefix(w.Name, "namespace.")
	})
	if len(vwc.Webhooks) != 1 {
		return nil, errors.New("the chart rendered no namespace guard entry")
	}
	if err := client.IgnoreNotFound(c.Client.Delete(ctx, vwc.DeepCopy())); err != nil {
		return nil, err
	}
	if err := c.Client.Create(ctx, vwc); err != nil {
		return nil, err
	}
	for _, ns := range []string{nsGuardDenied, nsGuardAllowed, nsGuardUnguarded} {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			return nil, err
		}
	}
	if err := c.CreateAll(ctx, locks, 16, func(i int) client.Object { return Stack(nsGuardDenied, fmt.Sprintf("s-%d", i), 256) }); err != nil {
		return nil, err
	}
	for _, ns := range []string{nsGuardDenied, nsGuardAllowed} {
		if err := c.CreateAll(ctx, locks, 16, func(i int) client.Object {
			return LockOn(ns, fmt.Sprintf("keep-%d", i), fmt.Sprintf("s-%d", i))
		}); err != nil {
			return nil, err
		}
	}
	// The reconciler labels a namespace once it holds Locks; until then
	// the entry does not send its deletes to lockguard.
	deadline := time.Now().Add(5 * time.Minute)
	for _, name := range []string{nsGuardDenied, nsGuardAllowed} {
		for {
			var ns corev1.Namespace
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
				return nil, err
			}
			if ns.Labels[lockv1alpha1.HasLocksLabel] == "true" {
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("namespace %s not labelled %s after 5 minutes", name, lockv1alpha1.HasLocksLabel)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	res := &NamespaceGuardResult{Locks: locks}
	cases := []struct {
		ns   string
		lat  *Latencies
		want func(error) bool
	}{
		{nsGuardUnguarded, &res.Unguarded, func(err error) bool { return err == nil }},
		{nsGuardDenied, &res.Denied, func(err error) bool {
			return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "namespace is protected by Lock(s) [")
		}},
		{nsGuardAllowed, &res.Allowed, func(err error) bool { return err == nil }},
	}
	for i := range deletes + 1 {
		for j := range cases {
			k := cases[(i+j)%len(cases)]
			start := time.Now()
			err := c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.ns}}, client.DryRunAll)
			took := time.Since(start)
			if i == 0 {
				continue // warm-up
			}
			k.lat.Add(took)
			if !k.want(err) {
				if res.Wrong++; res.FirstWrong == "" {
					res.FirstWrong = fmt.Sprintf("namespace %s: %v", k.ns, err)
				}
			}
		}
	}
	return res, c.Client.Delete(ctx, vwc)
}
