package certmanager_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	apiutil "github.com/cert-manager/cert-manager/pkg/api/util"
	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	cmclient "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/hack/certmanager"
)

const (
	ns          = "lockguard-system"
	certName    = "lockguard-serving"      // the chart's serving Certificate
	secretName  = "lockguard-serving-cert" // its Secret
	caSecret    = "lockguard-ca"           // the chart's CA
	serviceName = "lockguard-webhook"
	webhookName = "delete.lockguard.core.navique.com"
	// serverName is the name the API server verifies the webhook's
	// certificate for: <service>.<namespace>.svc.
	serverName = serviceName + "." + ns + ".svc"
	denial     = "resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource"
)

// TestChartWithCertManager installs the chart (default values: webhook
// mode, the chart's own CA) on a real API server with cert-manager's real
// controllers and cainjector, and runs lockguard in-process as the chart's
// ServiceAccount with the certificate cert-manager issued, projected into
// its certificate directory the way kubelet does. It checks that the API
// server calls lockguard through the chart's Service with that chain, that
// lockguard denies a locked delete, and that a forced renewal (new private
// key) is served without a restart while every delete keeps being decided
// by lockguard, with no TLS failure.
func TestChartWithCertManager(t *testing.T) {
	if _, err := framework.HelmPath(); err != nil {
		if os.Getenv("LOCKGUARD_REQUIRE_KUBE") == "1" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	logs := logFile(t)
	ctrl.SetLogger(zap.New(zap.WriteTo(logs), zap.UseDevMode(true)))
	tlsErrors := countTLSHandshakeErrors(t, logs)

	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmCRDs, err := certManagerCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{CRDDirs: []string{
		cmCRDs,
		framework.LockCRDDir(root),
		filepath.Join(root, "e2e", "testdata", "crds", "stacks.yaml"),
	}})
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := cmclient.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}

	// cert-manager, in this process.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	runInBackground(t, "cert-manager", func(ctx context.Context) error { return certmanager.Run(ctx, kubeconfig) })

	// The chart, rendered for this API server. lockguard listens on a free
	// port of 127.0.0.1 and the webhook Service's port is that port.
	port, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kubeVersion, apiVersions, err := framework.Capabilities(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.Render(ctx, framework.Release{KubeVersion: kubeVersion, APIVersions: apiVersions,
		Set: []string{"webhook.servicePort=" + strconv.Itoa(port)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "Deployment":
			// lockguard runs in this process instead of a pod.
		case o.GetKind() == "Service" && o.GetName() == serviceName:
			// No cluster network here: the API server resolves an
			// ExternalName Service to its external name and the webhook's
			// port, so it reaches lockguard on 127.0.0.1 while verifying
			// its certificate for lockguard-webhook.lockguard-system.svc,
			// exactly as through the chart's ClusterIP Service.
			svc := &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: serviceName, Namespace: ns},
				Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1"},
			}
			if err := c.Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
		default:
			apply = append(apply, o)
		}
	}
	if err := framework.Apply(ctx, c, apply...); err != nil {
		t.Fatal(err)
	}

	// cert-manager issues the chain: SelfSigned -> CA -> serving certificate.
	waitCertificateReady(ctx, t, cm, ns, caSecret, 1)
	waitCertificateReady(ctx, t, cm, ns, certName, 1)
	first := readServingSecret(ctx, t, c)
	checkChain(t, c, ctx, first)

	// cainjector puts the CA into the webhook configuration: every entry
	// the chart renders for this API server (before 1.30 the identity
	// Leases' and the unlock entries too: policies from 1.30).
	rendered := framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard")
	if rendered == nil {
		t.Fatal("the chart renders no ValidatingWebhookConfiguration lockguard")
	}
	entries, _, _ := unstructured.NestedSlice(rendered.Object, "webhooks")
	wantWebhooks := len(entries)
	if wantWebhooks < 11 {
		t.Fatalf("the chart renders %d webhook entries; want at least the 11 of every guard (object, namespace, CRD, update's two, ClusterLock's four, Lock and LockException creates)", wantWebhooks)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Name: "lockguard"}, &vwc); err != nil {
			return false, err
		}
		return len(vwc.Webhooks) == wantWebhooks && sameCABundle(&vwc), nil
	}); err != nil {
		t.Fatalf("cainjector did not inject a caBundle into ValidatingWebhookConfiguration lockguard: %v", err)
	}
	if got := vwc.Webhooks[0].ClientConfig.CABundle; !bytes.Equal(got, first.Data["ca.crt"]) {
		t.Fatalf("injected caBundle:\n%s\nwant the CA of the serving certificate:\n%s", got, first.Data["ca.crt"])
	}

	// lockguard, in this process, as the chart's ServiceAccount (so the
	// chart's RBAC is what it has), serving the Secret projected like a
	// Secret volume mounted without subPath.
	certDir := filepath.Join(t.TempDir(), "serving-certs")
	if err := framework.ProjectSecret(certDir, first.Data); err != nil {
		t.Fatal(err)
	}
	saConfig, err := env.UserConfig("system:serviceaccount:"+ns+":lockguard",
		"system:serviceaccounts", "system:serviceaccounts:"+ns, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	probePort, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopLockguard := context.WithCancel(ctx)
	mgr, err := manager.New(mgrCtx, saConfig, manager.Options{
		WebhookHost:             "127.0.0.1",
		WebhookPort:             port,
		CertDir:                 certDir,
		ProbeAddr:               "127.0.0.1:" + strconv.Itoa(probePort),
		MetricsAddr:             "0",
		LeaderElection:          true,
		LeaderElectionNamespace: ns,
		Registerer:              prometheus.NewRegistry(),
	})
	if err != nil {
		t.Fatal(err)
	}
	lockguardDone := make(chan struct{})
	var lockguardErr error
	go func() {
		defer close(lockguardDone)
		lockguardErr = mgr.Start(mgrCtx)
	}()
	stop := func() error {
		stopLockguard()
		<-lockguardDone
		return lockguardErr
	}
	t.Cleanup(func() { _ = stop() })
	waitReady(ctx, t, "http://127.0.0.1:"+strconv.Itoa(probePort)+"/readyz", lockguardDone)

	// The TLS failure counter works: a client that does not trust the CA
	// makes the server log one.
	if _, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}); err == nil {
		t.Fatal("a TLS client without the CA trusted lockguard's certificate")
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return tlsErrors.Load() == 1, nil
	}); err != nil {
		t.Fatalf("the TLS handshake error of an untrusting client was not counted (%d counted)", tlsErrors.Load())
	}

	// A locked Stack.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "forge"}}); err != nil {
		t.Fatal(err)
	}
	stack := &unstructured.Unstructured{}
	stack.SetAPIVersion("core.navique.com/v1alpha1")
	stack.SetKind("Stack")
	stack.SetNamespace("forge")
	stack.SetName("forge")
	if err := c.Create(ctx, stack.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	lock := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "protect-forge-stack"},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "forge"}},
	}
	if err := c.Create(ctx, lock); err != nil {
		t.Fatal(err)
	}
	// Dry-run deletes until lockguard has the Lock in its cache.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = c.Delete(ctx, stack.DeepCopy(), client.DryRunAll)
		return last != nil, nil
	}); err != nil {
		t.Fatalf("the delete of the locked Stack was never denied; last answer: %v", last)
	}
	checkDenied(t, last)
	// The reconciler (the leader, with the chart's RBAC) annotates the
	// target and activates the Lock.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got := stack.DeepCopy()
		if err := c.Get(ctx, client.ObjectKeyFromObject(got), got); err != nil {
			return false, err
		}
		var l lockv1alpha1.Lock
		if err := c.Get(ctx, client.ObjectKeyFromObject(lock), &l); err != nil {
			return false, err
		}
		return got.GetAnnotations()[lockv1alpha1.LockedAnnotation] == lock.Name && l.Status.Active, nil
	}); err != nil {
		t.Fatalf("lockguard, with the chart's RBAC, did not annotate the Stack and activate the Lock: %v", err)
	}

	// Deletes of the locked Stack keep going through the API server while
	// the certificate is renewed and swapped.
	deletes := startDeleting(ctx, t, c, stack)

	// Force a renewal, as `cmctl renew` does: the Issuing condition.
	crt, err := cm.CertmanagerV1().Certificates(ns).Get(ctx, certName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	apiutil.SetCertificateCondition(crt, crt.Generation, cmapi.CertificateConditionIssuing, cmmeta.ConditionTrue,
		"ManuallyTriggered", "Certificate re-issuance manually triggered by lockguard's test")
	if _, err := cm.CertmanagerV1().Certificates(ns).UpdateStatus(ctx, crt, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitCertificateReady(ctx, t, cm, ns, certName, 2)
	second := readServingSecret(ctx, t, c)
	if bytes.Equal(first.Data["tls.key"], second.Data["tls.key"]) {
		t.Fatal("the renewed certificate has the same private key; want a new key (rotationPolicy Always)")
	}
	if leaf(t, first).SerialNumber.Cmp(leaf(t, second).SerialNumber) == 0 {
		t.Fatal("the renewal did not issue a new certificate")
	}
	checkChain(t, c, ctx, second)
	if served := servedLeaf(t, port, first.Data["ca.crt"]); !served.Equal(leaf(t, first)) {
		t.Fatal("lockguard does not serve the first certificate before the swap")
	}
	before := deletes.denied.Load()

	// kubelet updates the volume: lockguard must pick the new files up
	// without a restart.
	if err := framework.ProjectSecret(certDir, second.Data); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return servedLeaf(t, port, second.Data["ca.crt"]).Equal(leaf(t, second)), nil
	}); err != nil {
		t.Fatalf("lockguard still serves the old certificate a minute after the Secret volume was updated: %v", err)
	}
	swapped := deletes.denied.Load()
	// New connections from the API server get the new certificate; keep
	// deleting a little longer.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return deletes.denied.Load() >= swapped+20, nil
	}); err != nil {
		t.Fatalf("deletes stopped being decided after the swap: %v", err)
	}
	// Concurrent deletes make the API server open new connections (HTTP/1.1
	// only), which get the new certificate.
	burst(ctx, t, c, stack, 16)
	deletes.stop()
	select {
	case <-lockguardDone:
		t.Fatalf("lockguard stopped: %v", lockguardErr)
	default:
	}
	t.Logf("deletes denied by lockguard: %d until the renewal, %d more until the new certificate was served, %d in all",
		before, swapped-before, deletes.denied.Load())
	if errs := deletes.errors(); len(errs) > 0 {
		t.Errorf("%d deletes were not decided by lockguard; first: %v", len(errs), errs[0])
	}
	if before == 0 {
		t.Error("no delete was decided while the certificate was renewed")
	}
	if n := tlsErrors.Load() - 1; n > 0 {
		t.Errorf("lockguard's webhook server logged %d TLS handshake errors from the API server; want 0", n)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "lockguard"}, &vwc); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, second.Data["ca.crt"]) {
		t.Error("the caBundle is not the CA of the renewed certificate")
	}
	checkAPIServerMetrics(ctx, t, env, deletes.denied.Load())

	// Lock removal is the way out, even with lockguard down: Locks are not
	// sent to the webhook, while the Stack's delete now fails closed.
	if err := stop(); err != nil {
		t.Errorf("lockguard stopped with %v", err)
	}
	if err := c.Delete(ctx, lock); err != nil {
		t.Errorf("deleting the Lock with lockguard down: %v; want it never blocked", err)
	}
	if err := c.Delete(ctx, stack.DeepCopy(), client.DryRunAll); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Errorf("deleting the Stack with lockguard down: got %v; want a failed webhook call (failurePolicy Fail)", err)
	}

	testUserIssuer(ctx, t, c, cm, kubeVersion, apiVersions)
}

// testUserIssuer installs the chart's certificate and webhook configuration
// with certManager.issuerRef naming an issuer of the user's, and checks that
// it signs the serving certificate and its CA is injected.
func testUserIssuer(ctx context.Context, t *testing.T, c client.Client, cm cmclient.Interface, kubeVersion string, apiVersions []string) {
	const userNS = "ops"
	objs, err := framework.Render(ctx, framework.Release{Name: "guard", Namespace: userNS, KubeVersion: kubeVersion, APIVersions: apiVersions,
		Set: []string{"certManager.issuerRef.name=corp-ca", "webhook.failurePolicy=Ignore"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: userNS}}); err != nil {
		t.Fatal(err)
	}
	issuer := &cmapi.Issuer{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: "corp-ca"},
		Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}},
	}
	if _, err := cm.CertmanagerV1().Issuers(userNS).Create(ctx, issuer, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Issuer" {
			t.Errorf("the chart rendered Issuer %s although the user named one", o.GetName())
		}
		if o.GetKind() == "Certificate" || o.GetKind() == "ValidatingWebhookConfiguration" {
			apply = append(apply, o)
		}
	}
	if len(apply) != 2 {
		t.Fatalf("rendered %v; want one Certificate and the webhook configuration", framework.Kinds(apply))
	}
	if err := framework.Apply(ctx, c, apply...); err != nil {
		t.Fatal(err)
	}
	waitCertificateReady(ctx, t, cm, userNS, "guard-lockguard-serving", 1)
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: userNS, Name: "guard-lockguard-serving-cert"}, &s); err != nil {
		t.Fatal(err)
	}
	if got := leaf(t, &s); got.Issuer.CommonName != got.Subject.CommonName || !slices.Contains(got.DNSNames, "guard-lockguard-webhook.ops.svc") {
		t.Errorf("serving certificate %s issued by %s for %v; want one from the user's self-signed issuer for guard-lockguard-webhook.ops.svc",
			got.Subject, got.Issuer, got.DNSNames)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		// The Secret read again each time: cert-manager may issue the
		// certificate once more after a race of its own (a second
		// CertificateRequest, "CSR not signed by referenced private key",
		// make test of 2026-12-07 18:38), and the injector follows the
		// Secret; compared with the first one read, the test waited for
		// a CA that was gone.
		if err := c.Get(ctx, client.ObjectKey{Namespace: userNS, Name: "guard-lockguard-serving-cert"}, &s); err != nil {
			return false, err
		}
		if err := c.Get(ctx, client.ObjectKey{Name: "guard-lockguard"}, &vwc); err != nil {
			return false, err
		}
		return bytes.Equal(vwc.Webhooks[0].ClientConfig.CABundle, s.Data["ca.crt"]), nil
	}); err != nil {
		t.Errorf("the CA of the user's issuer was not injected into ValidatingWebhookConfiguration guard-lockguard: %v", err)
	}
}

// burst sends n deletes of the locked Stack at once and checks that
// lockguard denies each.
func burst(ctx context.Context, t *testing.T, c client.Client, stack *unstructured.Unstructured, n int) {
	t.Helper()
	errs := make(chan error, n)
	for range n {
		go func() { errs <- c.Delete(ctx, stack.DeepCopy(), client.DryRunAll) }()
	}
	for range n {
		checkDenied(t, <-errs)
	}
}

// certManagerCRDs returns the CRD directory of the cert-manager module this
// test is built with (go.mod of this module), after checking that it is the
// version whose CRDs e2e/chart installs too.
func certManagerCRDs(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}}@{{.Version}} {{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		return "", fmt.Errorf("finding the cert-manager module: %w", err)
	}
	mod, dir, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	if mod != framework.CertManagerModule {
		return "", fmt.Errorf("this module uses %s but framework.CertManagerModule is %s: keep them the same", mod, framework.CertManagerModule)
	}
	if dir == "" {
		return "", errors.New("the cert-manager module is not downloaded")
	}
	return filepath.Join(dir, "deploy", "crds"), nil
}

// logFile collects the logs of cert-manager and lockguard; the test prints
// their end when it fails.
func logFile(t *testing.T) *os.File {
	f, err := os.Create(filepath.Join(t.TempDir(), "logs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			data, _ := os.ReadFile(f.Name())
			if len(data) > 20000 {
				data = data[len(data)-20000:]
			}
			t.Logf("end of the logs of cert-manager and lockguard:\n%s", data)
		}
		f.Close()
	})
	return f
}

// countTLSHandshakeErrors counts the TLS handshake errors that net/http
// servers without an ErrorLog (controller-runtime's webhook server) report
// through the standard logger.
func countTLSHandshakeErrors(t *testing.T, logs io.Writer) *atomic.Int64 {
	var n atomic.Int64
	r, w := io.Pipe()
	prev := log.Writer()
	log.SetOutput(io.MultiWriter(w, logs))
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := bufio.NewScanner(r)
		for s.Scan() {
			if strings.Contains(s.Text(), "TLS handshake error") {
				n.Add(1)
			}
		}
	}()
	t.Cleanup(func() {
		log.SetOutput(prev)
		w.Close()
		<-done
	})
	return &n
}

// runInBackground runs f until the test ends and fails the test if f
// returns an error before that.
func runInBackground(t *testing.T, name string, f func(context.Context) error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("%s stopped: %v", name, err)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
}

func waitCertificateReady(ctx context.Context, t *testing.T, cm cmclient.Interface, ns, name string, revision int) {
	t.Helper()
	var crt *cmapi.Certificate
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		crt, err = cm.CertmanagerV1().Certificates(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return apiutil.CertificateHasCondition(crt, cmapi.CertificateCondition{Type: cmapi.CertificateConditionReady, Status: cmmeta.ConditionTrue}) &&
			crt.Status.Revision != nil && *crt.Status.Revision >= revision &&
			!apiutil.CertificateHasCondition(crt, cmapi.CertificateCondition{Type: cmapi.CertificateConditionIssuing, Status: cmmeta.ConditionTrue}), nil
	})
	if err != nil {
		t.Fatalf("Certificate %s/%s did not become Ready with revision %d: %v; status: %+v", ns, name, revision, err, crt)
	}
}

func readServingSecret(ctx context.Context, t *testing.T, c client.Client) *corev1.Secret {
	t.Helper()
	var s corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: secretName}, &s); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if len(s.Data[k]) == 0 {
			t.Fatalf("Secret %s has no %s", secretName, k)
		}
	}
	return &s
}

func leaf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(s.Data["tls.crt"])
	if block == nil {
		t.Fatal("tls.crt is not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// checkChain checks the serving certificate: ECDSA P-256 for the Service's
// name, signed by ca.crt, which is the chart's CA (self-signed, issued by
// the SelfSigned issuer).
func checkChain(t *testing.T, c client.Client, ctx context.Context, s *corev1.Secret) {
	t.Helper()
	cert := leaf(t, s)
	key, ok := cert.PublicKey.(*ecdsa.PublicKey)
	if !ok || key.Curve != elliptic.P256() {
		t.Errorf("serving key is %T; want ECDSA P-256", cert.PublicKey)
	}
	if !slices.Contains(cert.DNSNames, serverName) {
		t.Errorf("serving certificate names %v; want %s", cert.DNSNames, serverName)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.Data["ca.crt"]) {
		t.Fatal("ca.crt has no certificate")
	}
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("serving certificate does not verify against ca.crt for %s: %v", serverName, err)
	}
	// The replicas present it to each other as clients (the peer
	// protocol's mutual TLS): cert-manager must have issued it for client
	// auth too.
	if _, err := cert.Verify(x509.VerifyOptions{DNSName: serverName, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("serving certificate does not verify as a client certificate against ca.crt for %s: %v", serverName, err)
	}
	// And with the peer identity (certs.PeerURI), without which the
	// replicas refuse each other's calls.
	if !slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == "spiffe://lockguard.navique.com/peer" }) {
		t.Errorf("serving certificate URIs %v; want the peer identity spiffe://lockguard.navique.com/peer", cert.URIs)
	}
	var ca corev1.Secret
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: caSecret}, &ca); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(ca.Data["tls.crt"])
	if block == nil {
		t.Fatal("the CA Secret has no certificate")
	}
	caCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if !caCert.IsCA || caCert.CheckSignatureFrom(caCert) != nil || cert.CheckSignatureFrom(caCert) != nil {
		t.Errorf("the serving certificate is not signed by the chart's self-signed CA %s", caCert.Subject)
	}
}

// servedLeaf returns the certificate lockguard serves to a client that
// verifies it as the API server does.
func servedLeaf(t *testing.T, port int, caPEM []byte) *x509.Certificate {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		&tls.Config{ServerName: serverName, RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("TLS handshake with lockguard: %v", err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0]
}

func waitReady(ctx context.Context, t *testing.T, url string, exited <-chan struct{}) {
	t.Helper()
	hc := &http.Client{Timeout: time.Second}
	for {
		if resp, err := hc.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-exited:
			t.Fatal("lockguard stopped before it was ready")
		case <-ctx.Done():
			t.Fatal("lockguard was not ready in time")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// checkDenied checks that err is lockguard's webhook denying the delete.
func checkDenied(t *testing.T, err error) {
	t.Helper()
	want := fmt.Sprintf("admission webhook %q denied the request: %s", webhookName, denial)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Fatalf("deleting the locked Stack: got %v; want Forbidden with %q", err, want)
	}
}

// deleter deletes the locked Stack through the API server in a loop.
type deleter struct {
	denied atomic.Int64
	mu     sync.Mutex
	errs   []error
	cancel context.CancelFunc
	done   chan struct{}
}

func startDeleting(ctx context.Context, t *testing.T, c client.Client, stack *unstructured.Unstructured) *deleter {
	want := fmt.Sprintf("admission webhook %q denied the request: %s", webhookName, denial)
	ctx, cancel := context.WithCancel(ctx)
	d := &deleter{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for i := 0; ctx.Err() == nil && i < 100000; i++ {
			// Real deletes and dry runs (the same decision, no Events).
			var opts []client.DeleteOption
			if i%2 == 1 {
				opts = append(opts, client.DryRunAll)
			}
			err := c.Delete(ctx, stack.DeepCopy(), opts...)
			switch {
			case ctx.Err() != nil:
				return
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), want):
				d.denied.Add(1)
			default:
				d.mu.Lock()
				d.errs = append(d.errs, fmt.Errorf("delete %d: %v", i, err))
				d.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	t.Cleanup(d.stop)
	return d
}

func (d *deleter) stop() {
	d.cancel()
	<-d.done
}

func (d *deleter) errors() []error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.errs)
}

// checkAPIServerMetrics checks, from the API server's own metrics, that it
// called lockguard's webhook at least denied times and never failed to.
func checkAPIServerMetrics(ctx context.Context, t *testing.T, env *framework.Env, denied int64) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rejected, failed float64
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "apiserver_admission_webhook_rejection_count{") || !strings.Contains(line, `name="`+webhookName+`"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("parsing %q: %v", line, err)
		}
		if strings.Contains(line, `error_type="no_error"`) {
			rejected += v
		} else {
			failed += v
			t.Errorf("the API server failed to call lockguard: %s", strings.TrimSpace(line))
		}
	}
	if rejected < float64(denied) {
		t.Errorf("the API server counts %v denials by %s; want at least %d", rejected, webhookName, denied)
	}
	t.Logf("API server: %v deletes denied by %s, %v failed calls", rejected, webhookName, failed)
}

// sameCABundle reports whether every webhook of vwc has a caBundle, the
// same one.
func sameCABundle(vwc *admissionregistrationv1.ValidatingWebhookConfiguration) bool {
	for _, wh := range vwc.Webhooks {
		if len(wh.ClientConfig.CABundle) == 0 || !bytes.Equal(wh.ClientConfig.CABundle, vwc.Webhooks[0].ClientConfig.CABundle) {
			return false
		}
	}
	return true
}
