package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestReadOnlyRaisedWhileCacheLags (docs/contract.md rule 16, issue 39):
// a CanNotDelete Lock is raised to ReadOnly while a warm replica's Lock
// cache lags (its watch events held back) and still holds it as
// CanNotDelete. The raise is not announced as a create is, so no marker
// makes the replica read; but once the reconciler (whose cache does not
// lag) has labelled the Stack read-only, the Lock says its ReadOnly level
// is in force, and the update guard sees that label in the review: a
// person's spec change must be refused. The replica is lockguard's update
// guard over its own Lock index, with a Freshness that is warm and holds
// no marker, served for one namespace.
func TestReadOnlyRaisedWhileCacheLags(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var lag atomic.Int64
	index, live := replicaIndex(ctx, t, lagWatchesBy(&lag), true)
	h := webhook.NewHandler(webhook.Config{Locks: index, Live: live, Freshness: warm{}, Now: index.Now})
	wh := serveAt(ctx, t, webhook.UpdatePath, webhook.NewUpdateHandler(h, webhook.Exemptions{}, nil))

	// A namespace the suite's lockguard's webhook leaves out
	// (ownWebhookLabel), whose updates of frozen Stacks only the test's
	// replica decides; the suite's reconciler labels them.
	ns := ownNamespace(ctx, t, "raise")
	vwc, err := wh.WebhookConfiguration(ctx, "guards.namespace.enabled=false", "guards.crd.enabled=false")
	if err != nil {
		t.Fatal(err)
	}
	// The update guard's entry for the main resource; this server answers
	// nothing else.
	i := slices.IndexFunc(vwc.Webhooks, func(e admissionregistrationv1.ValidatingWebhook) bool { return strings.HasPrefix(e.Name, "update.") })
	if i < 0 {
		t.Fatalf("the chart rendered no update entry: %d entries", len(vwc.Webhooks))
	}
	installFor(ctx, t, vwc, "lockguard-raise-test", vwc.Webhooks[i], ns)

	kube.CreateObject(t, framework.StackGVK, ns.Name, "probe")
	kube.CreateObject(t, framework.StackGVK, ns.Name, "raise")
	person := kube.Impersonate(t, restConfig(t), ns.Name, "probe", "jane@example.com")
	// A dry-run spec change, read again and resent while the reconciler's
	// writes of the annotation and label conflict with it.
	specChange := func(ctx context.Context, name string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := kube.GetObject(ctx, framework.StackGVK, ns.Name, name)
			if err != nil {
				return err
			}
			if err := unstructured.SetNestedField(u.Object, "large", "spec", "size"); err != nil {
				return err
			}
			return person.Update(ctx, u, client.DryRunAll)
		})
	}
	refusal := func(l *lockv1alpha1.Lock) string {
		return fmt.Sprintf("admission webhook %q denied the request: %s", vwc.Webhooks[0].Name, webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*l}, "spec"))
	}
	// Until the API server has loaded the configuration, no webhook
	// decides in the namespace: a ReadOnly Lock tells when.
	probe := framework.NewLock(ns.Name, "probe", "Stack", "probe", "")
	probe.Spec.Level = lockv1alpha1.LevelReadOnly
	probe = kube.CreateLock(t, probe)
	waitLabel(t, ns.Name, "probe", true)
	framework.Eventually(t, framework.DefaultTimeout, "the test's webhook configuration in effect", func(ctx context.Context) error {
		if err := specChange(ctx, "probe"); err == nil || err.Error() != refusal(probe) {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})

	lock := kube.CreateLock(t, framework.NewLock(ns.Name, "raise", "Stack", "raise", "freeze"))
	key := lockv1alpha1.TargetKey{Namespace: ns.Name, Group: lockv1alpha1.Group, Kind: "Stack", Name: "raise"}
	cachedLevel := func() (lockv1alpha1.LockLevel, error) {
		held, err := index.LiveLocks(key)
		if err != nil || len(held) != 1 {
			return "", fmt.Errorf("the cache holds %d Locks of the Stack (%v), want the one", len(held), err)
		}
		return held[0].Spec.Level, nil
	}
	framework.Eventually(t, framework.DefaultTimeout, "the CanNotDelete Lock in the replica's cache", func(context.Context) error {
		_, err := cachedLevel()
		return err
	})
	if err := specChange(ctx, "raise"); err != nil {
		t.Fatalf("a spec change under a CanNotDelete Lock: %v, want allowed", err)
	}

	lag.Store(int64(20 * time.Second))
	defer lag.Store(0)
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"level":"ReadOnly"}}`))
	if err := kube.Client.Patch(ctx, lock, patch); err != nil {
		t.Fatalf("raising the Lock to ReadOnly: %v", err)
	}
	raisedAt := time.Now()
	waitLabel(t, ns.Name, "raise", true)
	t.Logf("the reconciler labelled the Stack %s after the raise", time.Since(raisedAt).Round(time.Millisecond))
	err = specChange(ctx, "raise")
	// The replica's cache must still hold the Lock as CanNotDelete, or the
	// test proves nothing.
	if level, cerr := cachedLevel(); cerr != nil || level == lockv1alpha1.LevelReadOnly {
		t.Fatalf("the replica's cache caught up before the update was decided (level %q, %v): raise the lag", level, cerr)
	}
	if err == nil || err.Error() != refusal(lock) {
		t.Fatalf("a person's spec change right after the Lock was raised to ReadOnly and the Stack labelled, while the replica's cache lags: got %v, want %s", err, refusal(lock))
	}
}
