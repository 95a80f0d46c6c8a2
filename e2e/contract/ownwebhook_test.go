package contract_test

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// ownWebhookLabel marks the namespaces that have a webhook configuration
// of their own (webhookForNamespace): the suite's webhook configuration
// leaves them out (installSuiteWebhook), so that only the test's lockguard
// decides there.
const ownWebhookLabel = "lockguard.test/own-webhook"

// webhookForNamespace creates a namespace named after prefix and a
// webhook configuration of wh (the chart's, named name) that selects only
// that namespace (the object guard's and the Lock create entries only: the
// namespace and CRD guards' entries are cluster-scoped), both deleted at the end of the
// test (the namespace's Locks with it), and returns the namespace and the
// webhook configuration.
func webhookForNamespace(t *testing.T, wh *framework.LocalWebhook, prefix, name string) (string, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	ctx := context.Background()
	c := kube.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{ownWebhookLabel: prefix + "-" + rand.String(5)}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The Locks first: a control plane without the namespace
		// controller keeps a deleted namespace's objects, and the suite's
		// other tests count Locks across namespaces.
		_ = c.DeleteAllOf(context.Background(), &lockv1alpha1.Lock{}, client.InNamespace(ns.Name))
		_ = c.Delete(context.Background(), ns)
	})
	vwc, err := wh.WebhookConfiguration(ctx, framework.ObjectGuardOnly...)
	if err != nil {
		t.Fatal(err)
	}
	vwc.Name = name
	// The object guard's entry and the Lock create entry, both for this
	// namespace: the Locks created in it must reach wh before they exist.
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: ns.Labels}
	}
	if err := c.Create(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vwc) })
	return ns.Name, vwc
}
