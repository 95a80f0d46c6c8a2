package chart_test

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/navique/lockguard/e2e/framework"
)

// TestCertificates checks the cert-manager objects: the chart's CA chain and
// an ECDSA P-256 serving certificate for the webhook Service's names.
func TestCertificates(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{})
	str := func(o *unstructured.Unstructured, path ...string) string {
		t.Helper()
		if o == nil {
			t.Fatalf("object for %v not rendered", path)
		}
		s, _, _ := unstructured.NestedFieldNoCopy(o.Object, path...)
		v, _ := s.(string)
		return v
	}
	selfSigned := framework.Find(objs, "Issuer", "lockguard-selfsigned")
	if _, ok, _ := unstructured.NestedMap(selfSigned.Object, "spec", "selfSigned"); !ok {
		t.Error("Issuer lockguard-selfsigned is not a SelfSigned issuer")
	}
	ca := framework.Find(objs, "Certificate", "lockguard-ca")
	if isCA, _, _ := unstructured.NestedBool(ca.Object, "spec", "isCA"); !isCA || str(ca, "spec", "issuerRef", "name") != "lockguard-selfsigned" {
		t.Errorf("Certificate lockguard-ca = %v; want a CA signed by lockguard-selfsigned", ca.Object["spec"])
	}
	caIssuer := framework.Find(objs, "Issuer", "lockguard-ca")
	if str(caIssuer, "spec", "ca", "secretName") != str(ca, "spec", "secretName") {
		t.Errorf("Issuer lockguard-ca does not use the CA Certificate's Secret %s", str(ca, "spec", "secretName"))
	}
	serving := framework.Find(objs, "Certificate", "lockguard-serving")
	if str(serving, "spec", "issuerRef", "name") != "lockguard-ca" || str(serving, "spec", "issuerRef", "kind") != "Issuer" {
		t.Errorf("serving certificate issuerRef = %v; want Issuer lockguard-ca", serving.Object["spec"])
	}
	if str(serving, "spec", "privateKey", "algorithm") != "ECDSA" {
		t.Errorf("serving key algorithm %q; want ECDSA", str(serving, "spec", "privateKey", "algorithm"))
	}
	if size, _, _ := unstructured.NestedFieldNoCopy(serving.Object, "spec", "privateKey", "size"); size != int64(256) && size != float64(256) {
		t.Errorf("serving key size %v; want 256 (P-256)", size)
	}
	dns, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	if !slices.Contains(dns, "lockguard-webhook.lockguard-system.svc") {
		t.Errorf("dnsNames = %v; want lockguard-webhook.lockguard-system.svc, the name the API server verifies", dns)
	}
	if usages, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "usages"); !slices.Contains(usages, "server auth") || !slices.Contains(usages, "client auth") {
		t.Errorf("usages = %v; want server auth and client auth (the replicas present it to each other)", usages)
	}

	// A user-named issuer.
	objs = render(t, framework.Release{Set: []string{"certManager.issuerRef.name=corp-ca", "certManager.issuerRef.kind=ClusterIssuer"}})
	serving = framework.Find(objs, "Certificate", "lockguard-serving")
	if str(serving, "spec", "issuerRef", "name") != "corp-ca" || str(serving, "spec", "issuerRef", "kind") != "ClusterIssuer" {
		t.Errorf("serving certificate issuerRef = %v; want ClusterIssuer corp-ca", serving.Object["spec"])
	}

	// A user-provided Secret, no cert-manager.
	objs = render(t, framework.Release{Set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls"},
		SetString: []string{"webhook.tls.caBundle=Y2E="}})
	vwc := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard"))
	if string(vwc.Webhooks[0].ClientConfig.CABundle) != "ca" || vwc.Annotations["cert-manager.io/inject-ca-from"] != "" {
		t.Errorf("webhook caBundle %q, annotations %v; want the given CA and no cert-manager annotation", vwc.Webhooks[0].ClientConfig.CABundle, vwc.Annotations)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
	if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "my-tls" {
		t.Errorf("certificate volume = %+v; want Secret my-tls", v)
	}
}
