package contract_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/webhook"
)

// TestFailClosedWhenCacheNotSynced serves the handler with a Lock index
// whose cache never started, registered through the product webhook
// configuration (scoped to one namespace): the API server rejects the
// delete with lockguard's "could not verify" message.
func TestFailClosedWhenCacheNotSynced(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	locks, err := readmodel.NewLockIndex(ctx, unstartedCache(t))
	if err != nil {
		t.Fatal(err)
	}

	wh := serveDeletes(ctx, t, webhook.NewHandler(webhook.Config{Locks: locks}))

	// The product configuration, renamed and limited to one namespace.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "it-failclosed-", Labels: map[string]string{"lockguard-test": "fail-closed"}}}
	if err := kube.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	vwc, err := wh.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		t.Fatal(err)
	}
	vwc.Name = "lockguard-fail-closed-test"
	vwc.Webhooks = vwc.Webhooks[:1] // The object guard's; this server admits no Lock create.
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].Name = "not-synced.lockguard.core.navique.com"
		vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"lockguard-test": "fail-closed"}}
	}
	if err := kube.Client.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	defer kube.Client.Delete(context.Background(), vwc)
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), ns) })

	kube.CreateObject(t, framework.StackGVK, ns.Name, "forge")
	// Dry runs until the configuration is in effect: until then the
	// suite's lockguard, which decides an unlocked Stack's delete from its
	// cache in a millisecond, would let a real delete through.
	framework.Eventually(t, framework.DefaultTimeout, "the not-synced webhook in effect", func(ctx context.Context) error {
		err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "forge", client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "not-synced.lockguard") {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})
	lastErr := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "forge")
	if lastErr == nil {
		t.Fatal("the delete went through although lockguard could not verify Locks")
	}
	want := `admission webhook "not-synced.lockguard.core.navique.com" denied the request: lockguard could not verify Locks for Stack.core.navique.com ` +
		ns.Name + `/forge, so the delete is refused; retry when lockguard is ready: the Lock cache has not synced yet`
	if !apierrors.IsServiceUnavailable(lastErr) || lastErr.Error() != want {
		t.Fatalf("delete: got %v (reason %q), want ServiceUnavailable %q", lastErr, apierrors.ReasonForError(lastErr), want)
	}
	// Locks can still be deleted: the webhook never sees them.
	kube.DeleteLock(t, kube.CreateLock(t, framework.NewLock(ns.Name, "free", "Stack", "forge", "")))
	// Nor LockExceptions (the entry's not-an-exception condition):
	// revoking a break-glass exception never waits for lockguard, even
	// while the entry's lockguard is down.
	kube.CreateLock(t, framework.NewLock(ns.Name, "pierced", "Stack", "forge", ""))
	x := &lockv1alpha1.LockException{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "revoked"}, Spec: lockv1alpha1.LockExceptionSpec{
		TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "forge"}, Locks: []string{"pierced"},
		Operations: []lockv1alpha1.ExceptionOperation{lockv1alpha1.ExceptionDelete}, Reason: "revoked at once", User: whoAmI(t),
		ExpiresAt: metav1.NewTime(time.Now().Add(time.Hour))}}
	if err := kube.Client.Create(ctx, x); err != nil {
		t.Fatalf("creating a LockException: %v", err)
	}
	cancel() // The test's webhook server stops: its entry fails closed.
	framework.Eventually(t, framework.DefaultTimeout, "the not-synced webhook down", func(ctx context.Context) error {
		err := kube.DeleteObject(ctx, framework.StackGVK, ns.Name, "forge", client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "not-synced.lockguard`) {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})
	if err := kube.Client.Delete(context.Background(), x); err != nil {
		t.Fatalf("deleting a LockException while the delete entry's lockguard is down: %v, want it deleted", err)
	}
}

// serveDeletes serves h on webhook.Path, the object guard's, from a
// webhook server of the test's own (TLS as lockguard's, on a loopback
// port) until ctx ends, and returns it once it is up: the test's replica,
// which a webhook configuration of the test's points at.
func serveDeletes(ctx context.Context, t *testing.T, h admission.Handler) *framework.LocalWebhook {
	t.Helper()
	return serveAt(ctx, t, webhook.Path, h)
}

// serveAt is serveDeletes of h served on path.
func serveAt(ctx context.Context, t *testing.T, path string, h admission.Handler) *framework.LocalWebhook {
	t.Helper()
	wh, err := framework.NewLocalWebhook(suite.env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	server := ctrlwebhook.NewServer(ctrlwebhook.Options{Host: wh.Host, Port: wh.Port, CertDir: wh.CertDir, TLSOpts: []func(*tls.Config){certs.ServerTLS(false)}})
	server.Register(path, &admission.Webhook{Handler: h})
	go func() { _ = server.Start(ctx) }()
	framework.Eventually(t, framework.DefaultTimeout, "the webhook server is up", func(context.Context) error { return server.StartedChecker()(&http.Request{}) })
	return wh
}
