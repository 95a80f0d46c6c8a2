package contract_test

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
	ns := kube.NewNamespace(t, "latecrd")
	lock := kube.CreateLock(t, framework.NewLock(ns, "future", "Gateway", "edge", ""))
	kube.WaitLockStatus(t, lock, framework.LockStatus{
		Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonMissingReference,
		Message: `no kind Gateway.core.navique.com is served by the API server; the Lock becomes active when the kind is installed and Gateway "edge" exists`,
	})

	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "gateways.core.navique.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "core.navique.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: "Gateway", ListKind: "GatewayList", Plural: "gateways", Singular: "gateway"},
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

	gateway := schema.GroupVersionKind{Group: "core.navique.com", Version: "v1", Kind: "Gateway"}
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
