package manager

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	ctrlmanager "sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// syncedWhen is a cache whose sync ends when synced is closed, as a cache
// of 100,000 Locks' takes a while.
type syncedWhen struct {
	informertest.FakeInformers
	synced chan struct{}
}

func (c *syncedWhen) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-c.synced:
		return true
	case <-ctx.Done():
		return false
	}
}

// TestBeforeCachesStartsFirst: the manager starts a beforeCaches runnable
// while its caches have not synced, and another runnable only once they
// have: the order readiness relies on.
func TestBeforeCachesStartsFirst(t *testing.T) {
	c := &syncedWhen{synced: make(chan struct{})}
	// No API server: nothing here calls one (a loopback port nothing
	// listens on, should anything try).
	mgr, err := ctrlmanager.New(&rest.Config{Host: "https://127.0.0.1:1"}, ctrlmanager.Options{
		NewCache:               func(*rest.Config, cache.Options) (cache.Cache, error) { return c, nil },
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	early, late := make(chan struct{}), make(chan struct{})
	if err := mgr.Add(beforeCaches{ctrlmanager.RunnableFunc(func(ctx context.Context) error {
		close(early)
		<-ctx.Done()
		return nil
	})}); err != nil {
		t.Fatal(err)
	}
	if err := mgr.Add(ctrlmanager.RunnableFunc(func(ctx context.Context) error {
		close(late)
		<-ctx.Done()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case <-early:
	case err := <-done:
		t.Fatalf("the manager stopped before the beforeCaches runnable started: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the beforeCaches runnable did not start while the caches had not synced")
	}
	select {
	case <-late:
		t.Error("a plain runnable started though the caches never synced: the manager's order changed, and beforeCaches is the only runnable readiness may rely on")
	case <-time.After(200 * time.Millisecond):
	}
	close(c.synced)
	select {
	case <-late:
	case <-time.After(30 * time.Second):
		t.Error("the plain runnable did not start once the caches had synced")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("the manager stopped with %v", err)
	}
}
