package contract_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestAPIServerPresentsTheReviewCallerCertificate checks docs/hostile-clients.md's
// Forged reviews on a real kube-apiserver of its own, started with the
// admission configuration the page shows: its ValidatingAdmissionWebhook
// plugin presents a client certificate to the webhook, and a webhook
// behind certs.ReviewCallers (--review-client-ca, --review-client-name)
// answers the API server's review (the delete of a locked Stack is
// denied, naming the Lock), while a caller without the certificate that
// posts the same review is refused 403 and learns nothing.
func TestAPIServerPresentsTheReviewCallerCertificate(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ca, err := certs.NewAuthority("lockguard-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(host string) ([]byte, []byte) {
		c, k, _, err := ca.Issue([]string{host}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return c, k
	}
	caFile := write(certs.CAName, ca.CertPEM)
	servingCert, servingKey := issue("127.0.0.1")
	serving, err := tls.X509KeyPair(servingCert, servingKey)
	if err != nil {
		t.Fatal(err)
	}
	clientCert, clientKey := issue("kube-apiserver")

	// The webhook: lockguard's DELETE handler, one Lock on Stack
	// forge/forge, behind the caller check as the manager serves it.
	const ns = "forge"
	target := lockv1alpha1.TargetKey{Namespace: ns, Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}
	index := oneTarget{key: target, locks: []lockv1alpha1.Lock{{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "quarterly-close"}, Spec: lockv1alpha1.LockSpec{Reason: "finance freeze"}}}}
	callers, err := certs.NewReviewCallers(caFile, "kube-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(callers.Require(webhook.NewHandler(webhook.Config{Locks: index})))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{serving}}
	certs.RequestClientCertificates()(srv.TLS)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "https://")

	// The API server's admission configuration: a client certificate for
	// the webhook at host (a URL webhook's user is its host:port).
	kubeconfig := write("webhooks.kubeconfig", fmt.Appendf(nil, `apiVersion: v1
kind: Config
users:
- name: %q
  user:
    client-certificate: %s
    client-key: %s
`, host, write("client.crt", clientCert), write("client.key", clientKey)))
	admissionConfig := write("admission.yaml", fmt.Appendf(nil, `apiVersion: apiserver.config.k8s.io/v1
kind: AdmissionConfiguration
plugins:
- name: ValidatingAdmissionWebhook
  configuration:
    apiVersion: apiserver.config.k8s.io/v1
    kind: WebhookAdmissionConfiguration
    kubeConfigFile: %s
`, kubeconfig))
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{CRDDirs: framework.CRDDirs(root),
		APIServerFlags: map[string]string{"admission-control-config-file": admissionConfig}})
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	stack := framework.Object(framework.StackGVK, ns, "forge")
	if err := c.Create(ctx, stack); err != nil {
		t.Fatal(err)
	}
	none := admissionregistrationv1.SideEffectClassNone
	if err := c.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "review-callers"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "delete.lockguard.core.navique.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + webhook.Path), CABundle: ca.CertPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete}, Rule: admissionregistrationv1.Rule{APIGroups: []string{lockv1alpha1.Group}, APIVersions: []string{"*"}, Resources: []string{"stacks"}}}},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptr.To[int32](10),
		}},
	}); err != nil {
		t.Fatal(err)
	}

	// The API server's review is answered: the delete is denied, naming
	// the Lock (once the API server has loaded the configuration).
	const denial = "resource is protected by Lock(s) [quarterly-close]; delete the Lock(s) before deleting this resource (quarterly-close: finance freeze)"
	framework.Eventually(t, time.Minute, "the API server's delete denied by the webhook", func(ctx context.Context) error {
		err := c.Delete(ctx, framework.Object(framework.StackGVK, ns, "forge"), client.DryRunAll)
		if err == nil {
			return fmt.Errorf("the dry-run delete was allowed")
		}
		if want := `admission webhook "delete.lockguard.core.navique.com" denied the request: ` + denial; !strings.Contains(err.Error(), want) {
			return fmt.Errorf("the dry-run delete: %v; want %q", err, want)
		}
		return nil
	})

	// A forger without the certificate, posting a review of the same
	// delete straight to the webhook, learns nothing.
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	review := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"forged",` +
		`"kind":{"group":"core.navique.com","version":"v1alpha1","kind":"Stack"},` +
		`"resource":{"group":"core.navique.com","version":"v1alpha1","resource":"stacks"},` +
		`"name":"forge","namespace":"forge","operation":"DELETE","userInfo":{"username":"system:admin"},"object":null,"oldObject":{}}}`
	res, err := hc.Post(srv.URL+webhook.Path, "application/json", strings.NewReader(review))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	const refused = "lockguard answers admission reviews only from a caller with a client certificate (--review-client-ca); this call has none\n"
	if res.StatusCode != http.StatusForbidden || string(body) != refused {
		t.Errorf("a forged review without the certificate: HTTP %d %q; want 403 %q", res.StatusCode, body, refused)
	}
}

// oneTarget is a Lock cache holding locks, the Locks of key; the embedded
// webhook.NoLocks answers the other lookups.
type oneTarget struct {
	webhook.NoLocks
	key   lockv1alpha1.TargetKey
	locks []lockv1alpha1.Lock
}

// LiveLocks returns the Locks of key.
func (o oneTarget) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	if key != o.key {
		return nil, nil
	}
	return o.locks, nil
}
