package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// CRDGVK is the kind of CustomResourceDefinitions.
var CRDGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// GuardWebhookName is the name of the chart's webhook entry of guard
// (webhook.GuardNamespace or webhook.GuardCRD), as the API server quotes
// it in denial messages: WebhookName with the guard for its first label.
func (k *Kube) GuardWebhookName(guard string) string {
	_, rest, _ := strings.Cut(k.WebhookName, ".")
	return guard + "." + rest
}

// CRD returns the CustomResourceDefinition name as an unstructured object
// with only its name, to delete it.
func CRD(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(CRDGVK)
	u.SetName(name)
	return u
}

// InstallKind creates a namespaced core.navique.com kind served as v1
// (any spec), with labels on its CRD, waits until it is served, and
// returns its kind and the CRD's name. The CRD is deleted at the end of
// the test if it is still there.
func (k *Kube) InstallKind(t *testing.T, kind string, labels map[string]string) (schema.GroupVersionKind, string) {
	t.Helper()
	plural := strings.ToLower(kind) + "s"
	name := plural + "." + lockv1alpha1.Group
	crd := &unstructured.Unstructured{Object: map[string]any{
		"spec": map[string]any{
			"group": lockv1alpha1.Group,
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	crd.SetGroupVersionKind(CRDGVK)
	crd.SetName(name)
	crd.SetLabels(labels)
	if err := k.Client.Create(t.Context(), crd); err != nil {
		t.Fatalf("creating CustomResourceDefinition %s: %v", name, err)
	}
	t.Cleanup(func() { _ = k.Client.Delete(context.Background(), CRD(name)) })
	gvk := schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1", Kind: kind}
	Eventually(t, DefaultTimeout, kind+" served", func(ctx context.Context) error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
		return k.Client.List(ctx, list, client.Limit(1))
	})
	return gvk, name
}

// WantGuardDenied fails the test unless err is the API server's Forbidden
// error for a delete denied by guard's webhook entry with message.
func (k *Kube) WantGuardDenied(t *testing.T, err error, guard, message string) {
	t.Helper()
	want := fmt.Sprintf("admission webhook %q denied the request: %s", k.GuardWebhookName(guard), message)
	if err == nil {
		t.Fatalf("the delete succeeded; want it denied with %q", want)
	}
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("delete: got %v (reason %s),\n want Forbidden %s", err, apierrors.ReasonForError(err), want)
	}
}

// CRDDenialMessage is the CRD guard's message for a delete denied by locks.
func CRDDenialMessage(locks ...*lockv1alpha1.Lock) string {
	return webhook.CRDDenialMessage(derefLocks(locks))
}

// NamespaceDenialMessage is the namespace guard's message for the delete of
// namespace ns denied by locks.
func NamespaceDenialMessage(ns string, locks ...*lockv1alpha1.Lock) string {
	return webhook.NamespaceDenialMessage(ns, derefLocks(locks))
}

func derefLocks(locks []*lockv1alpha1.Lock) []lockv1alpha1.Lock {
	out := make([]lockv1alpha1.Lock, 0, len(locks))
	for _, l := range locks {
		out = append(out, *l)
	}
	return out
}

// ObjectGuardOnly are the chart values that render only the object guard's
// webhook entry: for tests that install a narrowed copy of the webhook
// configuration next to the suite's (the namespace and CRD entries are
// cluster-scoped, and would not be narrowed by a namespaceSelector, nor
// would the ClusterLock guard's entries; the update entry is left out too,
// so that the narrowed copy sends deletes only). protect.resources=null
// drops the opted-in kinds' entries, which the suite's own rendering lists
// (ProtectSet) and the chart refuses without the namespace guard.
var ObjectGuardOnly = []string{"guards.namespace.enabled=false", "guards.crd.enabled=false", "guards.readOnly.enabled=false", "guards.clusterLock.enabled=false", "protect.resources=null"}

// DeleteOnceUnguarded deletes obj (a namespace or a CRD) whose last Lock
// was just deleted. A replica whose cache has not seen the Lock go yet
// still denies (the safe side of cache lag), so a denial is retried until
// the deadline; any other error fails the test.
func (k *Kube) DeleteOnceUnguarded(t *testing.T, obj client.Object, opts ...client.DeleteOption) {
	t.Helper()
	Eventually(t, DefaultTimeout, fmt.Sprintf("deleting %s once unlocked", obj.GetName()), func(ctx context.Context) error {
		err := k.Client.Delete(ctx, obj, opts...)
		if err != nil && !apierrors.IsForbidden(err) {
			t.Fatalf("deleting %s once unlocked: %v", obj.GetName(), err)
		}
		return err
	})
}

// NamespaceLabelled checks that namespace ns carries the has-locks label
// (want true), or does not (want false).
func (k *Kube) NamespaceLabelled(ns string, want bool) func(context.Context) error {
	return func(ctx context.Context) error {
		var n corev1.Namespace
		if err := k.Client.Get(ctx, client.ObjectKey{Name: ns}, &n); err != nil {
			return err
		}
		if got := n.Labels[lockv1alpha1.HasLocksLabel] == "true"; got != want {
			return fmt.Errorf("namespace %s labels %v; want %s=true: %v", ns, n.Labels, lockv1alpha1.HasLocksLabel, want)
		}
		return nil
	}
}
