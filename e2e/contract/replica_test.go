package contract_test

import (
	"context"
	"net/http"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/internal/readmodel"
)

// A test's own replica: lockguard's handler over a Lock index of the
// test's (whose watches the test may hold back, or that never syncs),
// served by the test (serveAt) for a namespace of its own that the suite's
// lockguard leaves out, through a webhook configuration of the test's.

// replicaIndex returns a Lock index over a cache of the suite's API server
// whose transport wrap wraps (nil: none), started and synced when start
// says so (otherwise it never syncs), and a client of the API server that
// reads around any cache (the replica's Live).
func replicaIndex(ctx context.Context, t *testing.T, wrap func(http.RoundTripper) http.RoundTripper, start bool) (*readmodel.LockIndex, client.Client) {
	t.Helper()
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(suite.env.Config)
	if wrap != nil {
		cfg.Wrap(wrap)
	}
	c, err := cache.New(cfg, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	index, err := readmodel.NewLockIndex(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if start {
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			t.Fatal("the test's Lock cache did not sync")
		}
	}
	live, err := client.New(suite.env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return index, live
}

// ownNamespace creates a namespace named after prefix that the suite's
// lockguard's webhook leaves out (ownWebhookLabel), deleted, its Locks
// first, at the end of the test.
func ownNamespace(ctx context.Context, t *testing.T, prefix string) *corev1.Namespace {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{ownWebhookLabel: prefix}}}
	if err := kube.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = kube.Client.DeleteAllOf(context.Background(), &lockv1alpha1.Lock{}, client.InNamespace(ns.Name))
		_ = kube.Client.Delete(context.Background(), ns)
	})
	return ns
}

// installFor installs vwc, renamed name, with its one entry entry scoped
// to namespace ns, deleted at the end of the test.
func installFor(ctx context.Context, t *testing.T, vwc *admissionregistrationv1.ValidatingWebhookConfiguration, name string, entry admissionregistrationv1.ValidatingWebhook, ns *corev1.Namespace) {
	t.Helper()
	vwc.Name = name
	entry.NamespaceSelector = &metav1.LabelSelector{MatchLabels: ns.Labels}
	vwc.Webhooks = []admissionregistrationv1.ValidatingWebhook{entry}
	if err := kube.Client.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), vwc) })
}

// unstartedCache returns a cache of lockguard's scheme over the suite's
// API server that is never started: its informers never sync.
func unstartedCache(t *testing.T) cache.Cache {
	t.Helper()
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(suite.env.Config, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
