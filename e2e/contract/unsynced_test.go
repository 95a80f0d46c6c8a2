package contract_test

import (
	"context"
	"fmt"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestDecidesBeforeCacheSynced (issue 38: ready in seconds at scale): a
// replica whose Lock index has not synced (its cache never started here,
// as one still listing 100,000 Locks) decides every delete from the API
// server's Locks: the locked Stack's delete is denied naming its Lock, the
// unlocked Stack's goes through. Without a reader of the API server it
// fails closed (TestFailClosedWhenCacheNotSynced).
func TestDecidesBeforeCacheSynced(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	locks, live := replicaIndex(ctx, t, nil, false)
	wh := serveDeletes(ctx, t, webhook.NewHandler(webhook.Config{Locks: locks, Live: live, Now: locks.Now}))

	// A namespace the suite's lockguard leaves out (ownWebhookLabel).
	ns := ownNamespace(ctx, t, "unsynced")
	vwc, err := wh.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		t.Fatal(err)
	}
	// The object guard's entry; this server admits no Lock create.
	installFor(ctx, t, vwc, "lockguard-unsynced-test", vwc.Webhooks[0], ns)

	kube.CreateObject(t, framework.StackGVK, ns.Name, "kept")
	kube.CreateObject(t, framework.StackGVK, ns.Name, "free")
	lock := kube.CreateLock(t, framework.NewLock(ns.Name, "keep", "Stack", "kept", "production data"))
	want := fmt.Sprintf("admission webhook %q denied the request: %s", vwc.Webhooks[0].Name, webhook.DenialMessage([]lockv1alpha1.Lock{*lock}))
	// Dry runs until the configuration is in effect: until then no webhook
	// decides in the namespace.
	framework.Eventually(t, framework.DefaultTimeout, "the test's webhook configuration in effect", func(ctx context.Context) error {
		if err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "kept", client.DryRunAll); err == nil || err.Error() != want {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})
	if locks.HasSynced() {
		t.Fatal("the test's Lock index has synced: the test proves nothing")
	}
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "kept"); err == nil || err.Error() != want {
		t.Fatalf("delete of the locked Stack before the replica's cache synced: got %v, want %s", err, want)
	}
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "free"); err != nil {
		t.Fatalf("delete of the unlocked Stack before the replica's cache synced: %v, want it to go through", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the unlocked Stack gone", kube.Gone(framework.StackGVK, ns.Name, "free"))
	kube.MustExist(t, framework.StackGVK, ns.Name, "kept")
}
