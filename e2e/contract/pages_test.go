package contract_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/navique/lockguard/e2e/framework"
)

// TestLaggingCacheReadsEveryPage: in a namespace of more Locks than one
// page of the confirming read (500), while lockguard's Lock cache lags,
// a delete sent right after its target's Lock was created is denied: the
// read that confirms what the cache would allow goes through every page of
// the real API server's list, and the newest Lock is on one of them.
func TestLaggingCacheReadsEveryPage(t *testing.T) {
	inProcess(t)
	ctx := context.Background()
	c := kube.Client
	ns, vwc := webhookForNamespace(t, suite.webhook, "hostile-pages", "lockguard-hostile-pages")

	// 1,100 Locks of missing Stacks: three pages with the newest.
	names := make([]string, 1100)
	for i := range names {
		names[i] = fmt.Sprintf("other-%04d", i)
	}
	parallel(t, names, func(name string) error {
		return c.Create(ctx, framework.NewLock(ns, "lock-"+name, "Stack", name, ""))
	})
	if err := c.Create(ctx, framework.Object(framework.StackGVK, ns, "forge")); err != nil {
		t.Fatal(err)
	}
	// From now on lockguard's cache lags: the new Lock is not in it.
	watchLag.Store(int64(3 * time.Second))
	defer watchLag.Store(0)
	pagesBefore := lockPages.Load()
	lock := framework.NewLock(ns, "lock-forge", "Stack", "forge", "")
	if err := c.Create(ctx, lock); err != nil {
		t.Fatal(err)
	}
	err := c.Delete(ctx, framework.Object(framework.StackGVK, ns, "forge"))
	if !isDenial(err, vwc.Webhooks[0].Name, lock.Name) {
		t.Fatalf("delete of Stack forge right after its Lock was created, among %d Locks, while lockguard's cache lags: got %v, want the denial", len(names)+1, err)
	}
	pages := lockPages.Load() - pagesBefore
	if pages < 2 {
		t.Errorf("the confirming read asked for %d pages after the first, want at least 2 for %d Locks", pages, len(names)+1)
	}
	t.Logf("denied among %d Locks; the confirming read took %d pages after the first", len(names)+1, pages)
}
