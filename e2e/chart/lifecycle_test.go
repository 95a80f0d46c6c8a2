//go:build e2e

package chart_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestHelmLifecycle runs the real helm binary against a real API server:
// install, upgrade, an upgrade with a mistyped value, turning the guard off
// with lockGuard.enabled=false, and uninstall. Nothing a user keeps is lost
// on the way: the Lock CRD and the Locks survive every step, and once the
// guard is off or uninstalled no webhook configuration is left behind to
// fail deletes closed.
func TestHelmLifecycle(t *testing.T) {
	requireHelm(t)
	kubeVersions(t) // skips (or fails under LOCKGUARD_REQUIRE_KUBE) without a cached control plane
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	certManagerCRDs, err := framework.CertManagerCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{
		CRDDirs: []string{certManagerCRDs, repoFile(t, "e2e/testdata/crds/stacks.yaml")},
	})
	kubeconfig := filepath.Join(env.Dir, "helm.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, lockv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	chart, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	const release, ns = "lockguard", "lockguard-system"
	helm := func(args ...string) (string, error) {
		out, err := framework.Helm(ctx, append(args, "--namespace", ns, "--kubeconfig", kubeconfig)...)
		return string(out), err
	}
	mustHelm := func(args ...string) string {
		t.Helper()
		out, err := helm(args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	revision := func() int {
		t.Helper()
		var history []struct{ Revision int }
		if err := json.Unmarshal([]byte(mustHelm("history", release, "--max", "1", "-o", "json")), &history); err != nil || len(history) != 1 {
			t.Fatalf("helm history: %v (%d entries)", err, len(history))
		}
		return history[0].Revision
	}
	deployment := func() (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		return d, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: release}, d)
	}
	webhookConfigs := func() []string {
		t.Helper()
		var list admissionregistrationv1.ValidatingWebhookConfigurationList
		if err := c.List(ctx, &list); err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, w := range list.Items {
			names = append(names, w.Name)
		}
		return names
	}
	// kept checks what must survive every step: the CRD and the user's Lock.
	kept := func(step string) {
		t.Helper()
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := c.Get(ctx, client.ObjectKey{Name: "locks.core.navique.com"}, crd); err != nil {
			t.Fatalf("after %s, the Lock CRD: %v", step, err)
		}
		if err := c.Get(ctx, client.ObjectKey{Namespace: "apps", Name: "keep-forge"}, &lockv1alpha1.Lock{}); err != nil {
			t.Fatalf("after %s, the user's Lock: %v", step, err)
		}
	}

	// Install: the CRD comes from the chart's crds/ directory.
	mustHelm("install", release, chart, "--create-namespace")
	d, err := deployment()
	if err != nil {
		t.Fatalf("the Deployment after helm install: %v", err)
	}
	if got := *d.Spec.Replicas; got != 2 {
		t.Errorf("replicas after install: %d, want the default 2", got)
	}
	if got := webhookConfigs(); len(got) != 1 {
		t.Fatalf("ValidatingWebhookConfigurations after install: %v, want one", got)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}}); err != nil {
		t.Fatal(err)
	}
	// No lockguard runs here, and every Lock create needs it (the create
	// entry, failurePolicy Fail): the create fails closed. The test drops
	// that entry by hand to create the user's Lock; the upgrade below puts
	// it back.
	createEntry := func() (*admissionregistrationv1.ValidatingWebhookConfiguration, int) {
		t.Helper()
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: release}, vwc); err != nil {
			t.Fatal(err)
		}
		for i, w := range vwc.Webhooks {
			if w.Name == "create.lockguard.core.navique.com" {
				return vwc, i
			}
		}
		return vwc, -1
	}
	lock := framework.NewLock("apps", "keep-forge", "Stack", "forge", "production")
	if err := c.Create(ctx, lock.DeepCopy()); err == nil || !strings.Contains(err.Error(), `failed calling webhook "create.lockguard.core.navique.com"`) {
		t.Fatalf("creating a Lock with no lockguard running: %v; want it refused by the create entry (fail closed)", err)
	}
	vwc, i := createEntry()
	if i < 0 {
		t.Fatal("the installed webhook configuration has no Lock create entry")
	}
	vwc.Webhooks = append(vwc.Webhooks[:i], vwc.Webhooks[i+1:]...)
	if err := c.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	// The API server takes a moment to stop calling the removed entry.
	framework.Eventually(t, time.Minute, "creating a Lock with the CRD helm installed", func(ctx context.Context) error {
		err := c.Create(ctx, lock.DeepCopy())
		if err != nil && !strings.Contains(err.Error(), `failed calling webhook "create.lockguard.core.navique.com"`) {
			t.Fatalf("creating a Lock with the CRD helm installed: %v", err)
		}
		return err
	})

	// Upgrade.
	mustHelm("upgrade", release, chart, "--reuse-values", "--set", "replicas=3")
	if d, err = deployment(); err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("after helm upgrade --set replicas=3: %v, %v", d.Spec.Replicas, err)
	}
	kept("helm upgrade")
	if _, i := createEntry(); i < 0 {
		t.Fatal("helm upgrade did not restore the Lock create entry removed by hand")
	}

	// A mistyped value fails the upgrade and changes nothing.
	before := revision()
	_, err = helm("upgrade", release, chart, "--reuse-values", "--set", "replica=1")
	if err == nil || !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), "'replica'") {
		t.Fatalf("helm upgrade --set replica=1 (a typo): got %v, want a schema error naming it", err)
	}
	t.Logf("a mistyped value: %v", err)
	if after := revision(); after != before {
		t.Errorf("a failed upgrade made revision %d (was %d)", after, before)
	}
	if d, err = deployment(); err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("after the failed upgrade: replicas %v, %v; want 3 unchanged", d.Spec.Replicas, err)
	}

	// lockGuard.enabled=false turns the guard off: no lockguard, no
	// webhook configuration, but the Locks and their CRD stay.
	mustHelm("upgrade", release, chart, "--reuse-values", "--set", "lockGuard.enabled=false")
	if _, err := deployment(); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment with lockGuard.enabled=false: %v, want NotFound", err)
	}
	if got := webhookConfigs(); len(got) != 0 {
		t.Errorf("ValidatingWebhookConfigurations with lockGuard.enabled=false: %v, want none", got)
	}
	kept("helm upgrade --set lockGuard.enabled=false")

	// Back on, then uninstall.
	mustHelm("upgrade", release, chart, "--reuse-values", "--set", "lockGuard.enabled=true")
	if _, err := deployment(); err != nil {
		t.Fatalf("the Deployment with lockGuard.enabled=true again: %v", err)
	}
	mustHelm("uninstall", release, "--wait", "--timeout", "2m")
	if _, err := deployment(); !apierrors.IsNotFound(err) {
		t.Errorf("the Deployment after helm uninstall: %v, want NotFound", err)
	}
	if got := webhookConfigs(); len(got) != 0 {
		t.Errorf("ValidatingWebhookConfigurations after helm uninstall: %v, want none", got)
	}
	kept("helm uninstall")
}
