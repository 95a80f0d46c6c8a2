package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// warm is the Freshness of a warm replica that holds no marker: it
// never says the cache may lack a Lock, so the cache decides alone
// wherever it may.
type warm struct{}

func (warm) MayLack(lockv1alpha1.TargetKey) (string, bool) { return "", false }
func (warm) Confirmed(string)                              {}
func (warm) PendingCreate(lockv1alpha1.TargetKey) bool     { return false }

// TestExpiryExtendedWhileCacheLags (docs/contract.md rules 19 and 20,
// issue 39): a Lock that expired is extended (expiresAt moved later, or
// removed), or a Lock in Audit is switched to Enforce, while
// a warm replica's Lock cache lags (its watch events held back) and still
// holds the old copy; the delete of the target sent right after the
// update returned must be denied. The update is not announced as a create
// is, so no marker makes the replica read: it must see for itself that
// its allowance rests on a Lock that an expiry or Audit keeps from
// protecting. The replica is lockguard's handler
// over its own Lock index, with a Freshness that is warm and holds no
// marker (the suite's replica, whose webhook configuration the suite
// edits, is never warm), served for one namespace.
func TestExpiryExtendedWhileCacheLags(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	index, live := replicaIndex(ctx, t, lagWatches, true)
	wh := serveDeletes(ctx, t, webhook.NewHandler(webhook.Config{Locks: index, Live: live, Freshness: warm{}, Now: index.Now}))

	// A namespace the suite's lockguard leaves out (ownWebhookLabel),
	// whose deletes of targets only the test's replica decides.
	ns := ownNamespace(ctx, t, "revive")
	vwc, err := wh.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		t.Fatal(err)
	}
	// The object guard's entry; this server admits no Lock create.
	installFor(ctx, t, vwc, "lockguard-revive-test", vwc.Webhooks[0], ns)
	// Until the API server has loaded the configuration, no webhook
	// decides in the namespace: a Lock that never expires tells when.
	kube.CreateObject(t, framework.StackGVK, ns.Name, "probe")
	probe := kube.CreateLock(t, framework.NewLock(ns.Name, "probe", "Stack", "probe", ""))
	framework.Eventually(t, framework.DefaultTimeout, "the test's webhook configuration in effect", func(ctx context.Context) error {
		err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "probe", client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), webhook.DenialMessage([]lockv1alpha1.Lock{*probe})) {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})

	for _, tc := range []struct {
		name, raise string
		audit       bool // the Lock is in Audit rather than expiring
	}{
		{name: "Later", raise: `{"spec":{"expiresAt":%q}}`},
		{name: "Removed", raise: `{"spec":{"expiresAt":null%.0s}}`},
		{name: "Enforced", raise: `{"spec":{"enforcement":"Enforce"%.0s}}`, audit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			target := "forge-" + strings.ToLower(tc.name)
			kube.CreateObject(t, framework.StackGVK, ns.Name, target)
			lock := framework.NewLock(ns.Name, "until-soon-"+strings.ToLower(tc.name), "Stack", target, "freeze")
			if tc.audit {
				lock.Spec.Enforcement = lockv1alpha1.EnforcementAudit
			} else {
				lock.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(3 * time.Second).Truncate(time.Second)}
			}
			kube.CreateLock(t, lock)
			// Once the Lock expired (or, in Audit, at once), and the
			// replica's cache holds it, the delete is allowed.
			framework.Eventually(t, framework.DefaultTimeout, "the Stack's delete allowed with its Lock in the cache", func(ctx context.Context) error {
				key := lockv1alpha1.TargetKey{Namespace: ns.Name, Group: lockv1alpha1.Group, Kind: "Stack", Name: target}
				held, err := index.ExpiredLocks(key)
				if tc.audit {
					held, err = index.LiveLocks(key)
				}
				if err != nil || len(held) != 1 {
					return fmt.Errorf("the cache holds %d such Locks of the Stack (%v), want the one", len(held), err)
				}
				return kube.DeleteObject(ctx, framework.StackGVK, ns.Name, target, client.DryRunAll)
			})

			watchLag.Store(int64(5 * time.Second))
			defer watchLag.Store(0)
			later := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
			patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, tc.raise, later))
			if err := kube.Client.Patch(ctx, lock, patch); err != nil {
				t.Fatalf("raising the Lock's protection: %v", err)
			}
			err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, target, client.DryRunAll)
			wantDeniedBy(t, err, vwc.Webhooks[0].Name, lock)
		})
	}
}

// wantDeniedBy fails t unless err is the denial of webhook entry name
// naming lock alone, with its reason.
func wantDeniedBy(t *testing.T, err error, name string, lock *lockv1alpha1.Lock) {
	t.Helper()
	want := fmt.Sprintf("admission webhook %q denied the request: %s", name, webhook.DenialMessage([]lockv1alpha1.Lock{*lock}))
	if err == nil || err.Error() != want {
		t.Fatalf("the delete right after the expired Lock was extended, while the replica's cache lags: got %v, want %s", err, want)
	}
}
