package hostile_test

import (
	"context"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/navique/lockguard/e2e/framework"
)

// webhookForNamespace creates a namespace named after prefix and a
// webhook configuration of wh (the chart's, named name) that selects only
// that namespace (the object guard's and the Lock create entries only: the
// namespace and CRD guards' entries are cluster-scoped), both deleted at the end of the
// test, and returns the namespace and the webhook configuration.
func webhookForNamespace(t *testing.T, wh *framework.LocalWebhook, prefix, name string) (string, *admissionregistrationv1.ValidatingWebhookConfiguration) {
	t.Helper()
	ctx := context.Background()
	c := kube.Client
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: map[string]string{"lockguard.test/suite": prefix + "-" + rand.String(5)}}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
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
