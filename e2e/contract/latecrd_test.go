package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestKindInstalledAfterStart: a Lock on a kind that no CRD serves yet is
// MissingReference; once the CRD is installed (after lockguard started) and
// the object created, the Lock becomes active and the delete is denied.
func TestKindInstalledAfterStart(t *testing.T) {
	inProcess(t)
	// A kind of its own for each run, so that the test can run again
	// against the same API server while the last run's CRD is deleted.
	kind := "Gateway" + rand.String(5)
	plural := strings.ToLower(kind) + "s"
	ns := kube.NewNamespace(t, "latecrd")
	lock := kube.CreateLock(t, framework.NewLock(ns, "future", kind, "edge", ""))
	kube.WaitLockStatus(t, lock, framework.LockStatus{
		Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonMissingReference,
		Message: fmt.Sprintf(`no kind %[1]s.core.navique.com is served by the API server; the Lock becomes active when the kind is installed and %[1]s "edge" exists`, kind),
	})

	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".core.navique.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "core.navique.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
			}},
		},
	}
	if err := envtest.CreateCRDs(suite.env.Config, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil {
		t.Fatal(err)
	}
	if err := envtest.WaitForCRDs(suite.env.Config, []*apiextensionsv1.CustomResourceDefinition{crd}, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), crd) })

	gateway := schema.GroupVersionKind{Group: "core.navique.com", Version: "v1", Kind: kind}
	kube.CreateObject(t, gateway, ns, "edge")
	kube.WantDenied(t, kube.DeleteObject(t.Context(), gateway, ns, "edge"), lock)
	kube.WaitAnnotation(t, gateway, ns, "edge", "future")
	kube.WaitActive(t, lock)

	kube.DeleteLock(t, lock)
	kube.WaitAnnotation(t, gateway, ns, "edge", "")
	if err := kube.DeleteObject(t.Context(), gateway, ns, "edge", client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("deleting the Gateway once unlocked: %v", err)
	}
}
