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

	"github.com/navique/lockguard/e2e/framework"
)

// TestKindInstalledAfterStart: a Lock on a kind that no CRD serves yet is
// MissingReference; once the CRD is installed (after lockguard started) and
// the object created, the Lock becomes active and the delete is denied.
func TestKindInstalledAfterStart(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createLock(t, framework.NewLock(ns, "future", "Gateway", "edge", ""))
	l := waitLockState(t, ns, "future", missingReference)
	if want := `no kind Gateway.core.navique.com is served by the API server; the Lock becomes active when the kind is installed and Gateway "edge" exists`; l.Status.Conditions[0].Message != want {
		t.Errorf("Ready message %q, want %q", l.Status.Conditions[0].Message, want)
	}

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
	if err := envtest.CreateCRDs(suite.cfg, []*apiextensionsv1.CustomResourceDefinition{crd}); err != nil {
		t.Fatal(err)
	}
	if err := envtest.WaitForCRDs(suite.cfg, []*apiextensionsv1.CustomResourceDefinition{crd}, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = suite.client.Delete(context.Background(), crd) })

	gateway := schema.GroupVersionKind{Group: "core.navique.com", Version: "v1", Kind: "Gateway"}
	createObject(t, gateway, ns, "edge")
	wantDenied(t, deleteErr(gateway, ns, "edge"),
		"resource is protected by Lock(s) [future]; delete the Lock(s) before deleting this resource")
	waitAnnotation(t, gateway, ns, "edge", "future")
	waitLockState(t, ns, "future", active)

	deleteLock(t, ns, "future")
	waitAnnotation(t, gateway, ns, "edge", "")
	if err := suite.client.Delete(context.Background(), object(gateway, ns, "edge"), client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("deleting the Gateway once unlocked: %v", err)
	}
}
