package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/readmodel"
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

// TestCascadeBeforeOwnerIndexSynced (issue 38: ready in seconds at scale,
// with no readiness check waiting for the owner index): a replica whose
// Lock index has synced but whose owner index has not (its informers never
// start here, as in one still listing a million objects; kind discovery
// has given it the group's kinds) walks an owner's cascade over the
// namespace as the API server lists it. The delete of a Stack whose
// cascade would delete a locked PostgresCluster two levels down is refused
// naming the Lock, dry run or not, and nothing is deleted; the delete of a
// Stack whose cascade reaches nothing locked goes through. The walks are
// counted as confirmations of reason owners.
func TestCascadeBeforeOwnerIndexSynced(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	locks, live := replicaIndex(ctx, t, nil, true)

	// The owner index over a cache that never starts, fed by kind
	// discovery as in lockguard.
	unstarted := unstartedCache(t)
	disco, err := discovery.NewDiscoveryClientForConfig(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	kinds := readmodel.NewKinds(disco)
	owners := readmodel.NewOwnerIndex(unstarted, nil)
	go func() { _ = readmodel.NewDiscovery(kinds, owners, time.Hour).Start(ctx) }()
	framework.Eventually(t, framework.DefaultTimeout, "the owner index knows the group's kinds, none synced", func(context.Context) error {
		err := owners.Dependents("any", "any", func(schema.GroupKind, metav1.Object) bool { return true })
		if err == nil || !strings.Contains(err.Error(), "has not synced yet") {
			return fmt.Errorf("the owner index answers %v", err)
		}
		return nil
	})
	watched := func() ([]schema.GroupVersionKind, error) {
		served, err := kinds.Recent(time.Minute)
		var out []schema.GroupVersionKind
		for _, k := range served {
			if k.Watched() {
				out = append(out, k.GVK)
			}
		}
		return out, err
	}
	confirmations := &reasons{}
	wh := serveDeletes(ctx, t, webhook.NewHandler(webhook.Config{Locks: locks, Live: live, Now: locks.Now, Freshness: confirmations,
		Cascade: webhook.CascadeConfig{Graph: owners, Mode: webhook.CascadeDeny, API: live, Kinds: watched}}))

	ns := ownNamespace(ctx, t, "cascade-unsynced")
	vwc, err := wh.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		t.Fatal(err)
	}
	installFor(ctx, t, vwc, "lockguard-cascade-unsynced-test", vwc.Webhooks[0], ns)

	root := kube.CreateObject(t, framework.StackGVK, ns.Name, "root")
	mid := kube.CreateOwned(t, framework.StackGVK, ns.Name, "mid", root)
	kube.CreateOwned(t, framework.PostgresClusterGVK, ns.Name, "db", mid)
	free := kube.CreateObject(t, framework.StackGVK, ns.Name, "free")
	kube.CreateOwned(t, framework.PostgresClusterGVK, ns.Name, "free-db", free)
	lock := kube.CreateLock(t, framework.NewLock(ns.Name, "keep-db", "PostgresCluster", "db", "the data outlives the stack"))
	want := fmt.Sprintf("admission webhook %q denied the request: %s", vwc.Webhooks[0].Name,
		webhook.CascadeDenialMessage([]lockv1alpha1.Lock{*lock}, []string{"PostgresCluster/db"}))
	// Dry runs until the configuration is in effect: until then no webhook
	// decides in the namespace.
	framework.Eventually(t, framework.DefaultTimeout, "the test's webhook configuration in effect", func(ctx context.Context) error {
		if err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "root", client.DryRunAll); err == nil || err.Error() != want {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "root"); err == nil || err.Error() != want {
		t.Fatalf("delete of Stack root, whose cascade deletes the locked PostgresCluster db, before the owner index synced: got %v, want %s", err, want)
	}
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "mid"); err == nil || err.Error() != want {
		t.Fatalf("delete of Stack mid, the locked PostgresCluster db's owner, before the owner index synced: got %v, want %s", err, want)
	}
	intact(t, ns.Name, map[string]schema.GroupVersionKind{"root": framework.StackGVK, "mid": framework.StackGVK, "db": framework.PostgresClusterGVK})
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "free"); err != nil {
		t.Fatalf("delete of Stack free, whose cascade deletes nothing locked, before the owner index synced: %v, want it to go through", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "Stack free gone", kube.Gone(framework.StackGVK, ns.Name, "free"))

	if owners.HasSynced() {
		t.Fatal("the test's owner index has synced: the test proves nothing")
	}
	if got := confirmations.all(); !slices.Contains(got, webhook.ReasonOwners) {
		t.Errorf("confirmations %q, want some of reason %q", got, webhook.ReasonOwners)
	}
}

// reasons is a webhook.Freshness that says the Lock cache may always lack
// a Lock (as a replica without the peer protocol) and records the reasons
// of the confirmations.
type reasons struct {
	mu   sync.Mutex
	seen []string
}

func (r *reasons) MayLack(lockv1alpha1.TargetKey) (string, bool) { return "cold", true }
func (r *reasons) PendingCreate(lockv1alpha1.TargetKey) bool     { return false }

func (r *reasons) Confirmed(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, reason)
}

func (r *reasons) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}
