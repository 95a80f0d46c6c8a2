//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestStartsBesideABrokenKind: a kind of the group whose list always
// fails (here, its conversion webhook is unreachable) must not keep
// lockguard from starting, nor its reconciler from working on the other
// kinds, Locks on the broken kind or not. Three waits could each have
// hung on that kind's informer, which every replica runs for the owner
// index: the manager's, before it starts anything, for the informers made
// before its start (the owner index's are made after, by kind discovery
// once the manager runs); the reconciler's, before its workers
// start, for its watches (controller.kindSource waits for each watch's own
// informer, and discovery adds a kind's watch once it has synced); and a
// worker's read of a target (bounded by controller.targetReadTimeout; this
// test does not show that bound at work: with it removed, the Lock on the
// Stack still went active at once).
func TestStartsBesideABrokenKind(t *testing.T) {
	framework.Logs()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{CRDDirs: framework.CRDDirs(root)})
	k, err := env.Kube("broken-")
	if err != nil {
		t.Fatal(err)
	}

	// Broken serves v1 (its storage) and v2; objects stored as v1 are
	// converted to v2 by a webhook nobody serves, so that a list in v2,
	// the version discovery prefers, always fails.
	preserve := true
	schemaProps := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}
	url := "https://127.0.0.1:1/convert"
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "brokens.core.navique.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "core.navique.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Broken", ListKind: "BrokenList", Plural: "brokens", Singular: "broken"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaProps},
				{Name: "v2", Served: true, Schema: schemaProps},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{
				Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{
					ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url},
					ConversionReviewVersions: []string{"v1"},
				},
			},
		},
	}
	crds := []*apiextensionsv1.CustomResourceDefinition{crd}
	if err := envtest.CreateCRDs(env.Config, crds); err != nil {
		t.Fatal(err)
	}
	if err := envtest.WaitForCRDs(env.Config, crds, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ns := k.NewNamespace(t, "broken")
	k.CreateObject(t, schema.GroupVersionKind{Group: "core.navique.com", Version: "v1", Kind: "Broken"}, ns, "b")
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Group: "core.navique.com", Version: "v2", Kind: "BrokenList"})
	if err := k.Client.List(t.Context(), list); err == nil {
		t.Fatal("the premise fails: a list of Broken in v2 succeeded")
	}

	// lockguard, with the admin's credentials (RBAC is not what is tested).
	dir := t.TempDir()
	bin, err := framework.BuildLockguard(dir)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	if err := k.Client.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: framework.ServiceAccountNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	lg, err := framework.StartLockguard(framework.LockguardOptions{Binary: bin, Kubeconfig: kubeconfig, Dir: dir, Logs: &logs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = lg.Stop(30 * time.Second)
		if t.Failed() {
			t.Logf("lockguard's log:\n%s", logs.String())
		}
	})

	// Its reconciler works on the other kinds, with Locks on the broken
	// kind too (more than it has workers).
	for i := range 6 {
		k.CreateLock(t, framework.NewLock(ns, fmt.Sprintf("on-broken-%d", i), "Broken", fmt.Sprintf("b-%d", i), "a kind whose list fails"))
	}
	time.Sleep(3 * time.Second) // The workers take the broken targets first.
	k.CreateObject(t, framework.StackGVK, ns, "web")
	lock := k.CreateLock(t, framework.NewLock(ns, "keep", "Stack", "web", "beside a broken kind"))
	took := framework.Eventually(t, framework.DefaultTimeout, "Lock keep active beside the broken kind", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := k.Client.Get(ctx, client.ObjectKeyFromObject(lock), &got); err != nil {
			return err
		}
		if !got.Status.Active {
			return fmt.Errorf("not active yet (status %+v)", got.Status)
		}
		return nil
	})
	t.Logf("Lock active %s after its create, beside a kind whose list fails", took.Round(100*time.Millisecond))
}
