package framework

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/webhook"
)

// CreateOwned creates an object of a sample kind owned by owners (each
// with blockOwnerDeletion, the first as controller), as an operator
// creates its children.
func (k *Kube) CreateOwned(t *testing.T, gvk schema.GroupVersionKind, ns, name string, owners ...*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := Object(gvk, ns, name)
	refs := make([]metav1.OwnerReference, 0, len(owners))
	for i, o := range owners {
		refs = append(refs, metav1.OwnerReference{
			APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID(),
			Controller: ptr.To(i == 0), BlockOwnerDeletion: ptr.To(true),
		})
	}
	u.SetOwnerReferences(refs)
	if err := k.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// CascadeDenialError is the API server's error text for the delete of an
// owner denied because its cascade would delete dependents (Kind/name)
// that locks protect.
func (k *Kube) CascadeDenialError(locks []*lockv1alpha1.Lock, dependents ...string) string {
	return EntryCascadeDenialError(k.WebhookName, locks, dependents...)
}

// EntryCascadeDenialError is CascadeDenialError as the webhook entry
// entry denies it: the chart's protect entry, for an owner of an opted-in
// kind (docs/contract.md rule 21).
func EntryCascadeDenialError(entry string, locks []*lockv1alpha1.Lock, dependents ...string) string {
	return fmt.Sprintf("admission webhook %q denied the request: %s", entry, webhook.CascadeDenialMessage(derefLocks(locks), dependents))
}

// WaitCascadeDenied waits until a server-side dry-run DELETE of the object
// (with opts) is denied with want: lockguard's owner index sees an
// ownerReference a moment after the dependent's create, and until then
// allows the owner's delete. A dry run changes nothing, so an allowed one
// is retried; an error other than Forbidden fails the test.
func (k *Kube) WaitCascadeDenied(t *testing.T, gvk schema.GroupVersionKind, ns, name, want string, opts ...client.DeleteOption) {
	t.Helper()
	Eventually(t, DefaultTimeout, fmt.Sprintf("a dry-run delete of %s %s/%s denied with %q", gvk.Kind, ns, name, want), func(ctx context.Context) error {
		err := k.DeleteObject(ctx, gvk, ns, name, append(opts, client.DryRunAll)...)
		switch {
		case err == nil:
			return fmt.Errorf("the dry-run delete of %s %s/%s was allowed", gvk.Kind, ns, name)
		case !apierrors.IsForbidden(err):
			t.Fatalf("dry-run delete of %s %s/%s: got error %v, want Forbidden", gvk.Kind, ns, name, err)
		case err.Error() != want:
			return err
		}
		return nil
	})
}

// WantError fails the test unless err's text is exactly want (a Forbidden
// error, when want is not empty), or err is nil when want is empty.
func WantError(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("%s: %v; want it allowed", what, err)
	case want == "":
	case err == nil:
		t.Fatalf("%s succeeded; want it denied with %q", what, want)
	case !apierrors.IsForbidden(err) || err.Error() != want:
		t.Fatalf("%s:\n  got  %v (reason %s)\n  want Forbidden %s", what, err, apierrors.ReasonForError(err), want)
	}
}

// Warnings records the warnings the API server sends a client.
type Warnings struct {
	mu       sync.Mutex
	warnings []string
}

// HandleWarningHeader records one warning.
func (w *Warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.warnings = append(w.warnings, strings.TrimSpace(text))
}

// All returns the warnings recorded so far (none for a nil *Warnings).
func (w *Warnings) All() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.warnings)
}

// WarningClient returns a client of cfg's API server (lockguard's scheme)
// and the recorder of the warnings its requests get.
func WarningClient(t *testing.T, cfg *rest.Config) (client.Client, *Warnings) {
	t.Helper()
	warnings := &Warnings{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = warnings
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, warnings
}
