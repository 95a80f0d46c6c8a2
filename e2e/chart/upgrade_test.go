//go:build e2e

package chart_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// previousChartRev is the last commit of main that changed deploy/chart/
// before the current chart version: the chart users upgrade from. Move it
// forward when a chart version is released.
const previousChartRev = "d03d13b65e3791e56549d40eedaf7af8b000fbf3"

// postRenderEnv, when set in the environment of this test binary, makes it
// run as a helm post-renderer instead of running tests (see TestMain): its
// value is "URL CAFILE", where the webhooks are pointed, as
// framework.LocalWebhook.PointAt does for the tests that apply the chart.
const postRenderEnv = "LOCKGUARD_CHART_POST_RENDER"

// TestMain runs the tests, or a helm post-renderer (postRenderEnv).
func TestMain(m *testing.M) {
	if spec := os.Getenv(postRenderEnv); spec != "" {
		if err := postRender(spec, os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "post-render:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// postRender copies the manifests helm renders from in to out, with every
// ValidatingWebhookConfiguration pointed at a local webhook server: the
// URL and CA of spec ("URL CAFILE") replace the chart's Service and
// caBundle. Everything else is left as rendered.
func postRender(spec string, in io.Reader, out io.Writer) error {
	address, caFile, ok := strings.Cut(spec, " ")
	if !ok {
		return fmt.Errorf("%s=%q: want \"HOST:PORT CAFILE\"", postRenderEnv, spec)
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	objs, err := framework.Decode(data)
	if err != nil {
		return err
	}
	host, port, ok := strings.Cut(address, ":")
	if !ok {
		return fmt.Errorf("address %q: want HOST:PORT", address)
	}
	w := &framework.LocalWebhook{Host: host, CA: ca}
	if _, err := fmt.Sscan(port, &w.Port); err != nil {
		return fmt.Errorf("address %q: %w", address, err)
	}
	for _, o := range objs {
		if o.GetKind() == "ValidatingWebhookConfiguration" {
			var vwc admissionregistrationv1.ValidatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &vwc); err != nil {
				return err
			}
			w.PointAt(&vwc)
			m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&vwc)
			if err != nil {
				return err
			}
			// The converter drops apiVersion and kind of a typed object.
			o.Object = m
			o.SetAPIVersion("admissionregistration.k8s.io/v1")
			o.SetKind("ValidatingWebhookConfiguration")
		}
		y, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(out, "---\n%s", y); err != nil {
			return err
		}
	}
	return nil
}

// previousChart extracts the chart as of previousChartRev from the
// repository's git history into a new directory and returns the chart's
// directory in it. It skips the test when git or that commit is not
// available (a shallow clone, an exported tree).
func previousChart(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skipf("the upgrade test takes the previous chart from git history, and git is not on PATH: %v", err)
	}
	if out, err := exec.Command("git", "-C", root, "cat-file", "-e", previousChartRev+"^{commit}").CombinedOutput(); err != nil {
		t.Skipf("the upgrade test takes the previous chart from commit %s, which this checkout does not have (a shallow clone? git fetch --unshallow): %v %s",
			previousChartRev, err, out)
	}
	archive, err := exec.Command("git", "-C", root, "archive", "--format=tar", previousChartRev, "deploy/chart").Output()
	if err != nil {
		t.Fatalf("git archive %s deploy/chart: %v", previousChartRev, err)
	}
	dir := t.TempDir()
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(path, dir+string(filepath.Separator)) {
			t.Fatalf("git archive: entry %q leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(path, 0o755)
		case tar.TypeReg:
			var data []byte
			if data, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(path, data, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	chart := filepath.Join(dir, "deploy", "chart", "lockguard")
	if _, err := os.Stat(filepath.Join(chart, "Chart.yaml")); err != nil {
		t.Fatalf("commit %s has no chart at deploy/chart/lockguard: %v", previousChartRev, err)
	}
	return chart
}

// TestUpgradeFromPreviousChart runs helm install of the previous chart
// version and helm upgrade to the current one on the real API server of
// every cached Kubernetes version, with lockguard running and Locks in
// place, and checks that no delete of a locked object is allowed at any
// moment: server-side dry-run deletes (the same answer as a real delete)
// run in a loop from before the upgrade until after it. The webhooks are
// pointed at the lockguard binary, running as the release's ServiceAccount,
// by a post-renderer (the API server here cannot reach a Service).
func TestUpgradeFromPreviousChart(t *testing.T) {
	requireHelm(t)
	for _, v := range kubeVersions(t) {
		t.Run(v, func(t *testing.T) { testUpgrade(t, v) })
	}
}

func testUpgrade(t *testing.T, version string) {
	previous := previousChart(t)
	current, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	certManagerCRDs, err := framework.CertManagerCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{
		Version: version,
		CRDDirs: []string{certManagerCRDs, repoFile(t, "e2e/testdata/crds/stacks.yaml")},
	})
	kubeconfig := filepath.Join(env.Dir, "helm.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	k, err := env.Kube("upgrade-")
	if err != nil {
		t.Fatal(err)
	}

	// lockguard's webhook server, certificate first: the post-renderer
	// points the chart's webhooks at it.
	wh, err := framework.NewLocalWebhook(env.Dir)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(env.Dir, "webhook-ca.crt")
	if err := os.WriteFile(caFile, wh.CA, 0o600); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(postRenderEnv, wh.Address()+" "+caFile)
	// The release whose ServiceAccount the binary runs as: it has exactly
	// the RBAC of the chart installed at each moment.
	const release, ns = framework.ReleaseName, framework.ServiceAccountNamespace
	helm := func(args ...string) string {
		t.Helper()
		out, err := framework.Helm(ctx, append(args, "--namespace", ns, "--kubeconfig", kubeconfig)...)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}

	// The previous chart, with its CRD; then the lockguard binary.
	helm("install", release, previous, "--create-namespace", "--post-renderer", self)
	// The previous chart has no namespace guard, and grants no RBAC on
	// namespaces: lockguard runs as it did then.
	_, old := startLockguard(ctx, t, env, wh, "--namespace-guard=false")
	// The previous chart's Lock CRD has no status.scope: the API server
	// drops what lockguard writes there until the CRD is upgraded.
	k.LockCRDWithoutScope = true

	appNS := k.NewNamespace(t, "apps")
	k.CreateObject(t, framework.StackGVK, appNS, "forge")
	k.CreateObject(t, framework.StackGVK, appNS, "mill")
	forge := k.CreateLock(t, framework.NewLock(appNS, "protect-forge", "Stack", "forge", "production"))
	mill1 := k.CreateLock(t, framework.NewLock(appNS, "protect-mill", "Stack", "mill", "production"))
	mill2 := k.CreateLock(t, framework.NewLock(appNS, "protect-mill-too", "Stack", "mill", "audit"))
	k.WaitActive(t, forge, mill1, mill2)
	k.WaitDenied(t, framework.StackGVK, appNS, "forge", forge)
	k.WaitDenied(t, framework.StackGVK, appNS, "mill", mill1, mill2)

	// Dry-run deletes of both locked Stacks, in a loop, until told to
	// stop; any allowed delete is a failure.
	var (
		attempts, denied atomic.Int64
		mu               sync.Mutex
		allowed, other   []string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, name := range []string{"forge", "mill"} {
				err := k.DeleteObject(ctx, framework.StackGVK, appNS, name, client.DryRunAll)
				attempts.Add(1)
				switch {
				case err == nil:
					mu.Lock()
					allowed = append(allowed, fmt.Sprintf("%s at %s", name, time.Now().Format(time.RFC3339Nano)))
					mu.Unlock()
				case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "resource is protected by Lock(s)"):
					denied.Add(1)
				default:
					// Refused for another reason (e.g. the API server
					// failing closed while it reloads its webhooks):
					// nothing was deleted, but say so.
					mu.Lock()
					other = append(other, err.Error())
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	waitAttempts := func(n int64) {
		t.Helper()
		framework.Eventually(t, time.Minute, fmt.Sprintf("%d more dry-run deletes", n), func(context.Context) error {
			if got := attempts.Load(); got < n {
				return fmt.Errorf("%d so far", got)
			}
			return nil
		})
	}
	waitAttempts(20)

	// The upgrade, as the README says: the chart's CRDs first (helm never
	// upgrades them), then helm upgrade.
	crds, err := framework.ReadObjects(filepath.Join(current, "crds", "core.navique.com_locks.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	before := attempts.Load()
	if err := framework.Apply(ctx, k.Client, crds...); err != nil {
		t.Fatal(err)
	}
	helm("upgrade", release, current, "--post-renderer", self)
	k.LockCRDWithoutScope = false // the current lockguard below writes it
	during := attempts.Load() - before
	waitAttempts(attempts.Load() + 20)
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	t.Logf("Kubernetes %s: %d dry-run deletes of locked Stacks, %d while the CRD and the chart were upgraded: %d denied by the Locks, %d refused otherwise, %d allowed",
		version, attempts.Load(), during, denied.Load(), len(other), len(allowed))
	if len(allowed) > 0 {
		t.Errorf("deletes of locked Stacks were allowed during the upgrade: %v", allowed)
	}
	if len(other) > 0 {
		t.Logf("refused for other reasons (nothing deleted): %v", other)
	}
	if during == 0 {
		t.Errorf("no dry-run delete ran while the upgrade applied; the check proves nothing")
	}

	// The release is the current chart now, and its webhook configuration
	// is the current one's.
	var history []struct {
		Revision int
		Chart    string
		Status   string
	}
	if err := json.Unmarshal([]byte(helm("history", release, "-o", "json")), &history); err != nil {
		t.Fatal(err)
	}
	meta := chartMetadata(t)
	if len(history) != 2 || history[1].Chart != "lockguard-"+meta.Version || history[1].Status != "deployed" {
		t.Errorf("helm history = %+v; want revision 2 deployed with lockguard-%s", history, meta.Version)
	}
	// helm upgrade rendered against the live API server: render with its
	// capabilities too (from 1.30 the identity Leases' rule is a policy,
	// not an entry of the webhook configuration).
	_, apiVersions, err := framework.Capabilities(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := framework.Render(ctx, framework.Release{Name: release, Namespace: ns, KubeVersion: version, APIVersions: apiVersions})
	if err != nil {
		t.Fatal(err)
	}
	want := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, framework.Find(rendered, "ValidatingWebhookConfiguration", release))
	live := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k.Client.Get(ctx, client.ObjectKey{Name: release}, live); err != nil {
		t.Fatal(err)
	}
	if len(live.Webhooks) != len(want.Webhooks) || *live.Webhooks[0].SideEffects != *want.Webhooks[0].SideEffects ||
		live.Webhooks[0].ClientConfig.URL == nil {
		t.Errorf("the live webhook configuration after the upgrade is not the current chart's pointed at lockguard: %+v", live.Webhooks)
	}

	// The Locks and their targets are all there, and still protect them.
	for _, name := range []string{"forge", "mill"} {
		k.MustExist(t, framework.StackGVK, appNS, name)
	}
	k.WantDenied(t, k.DeleteObject(ctx, framework.StackGVK, appNS, "forge"), forge)
	k.WantDenied(t, k.DeleteObject(ctx, framework.StackGVK, appNS, "mill"), mill1, mill2)

	// lockguard as the current chart runs it, with the current chart's
	// RBAC: it labels the namespace, and the namespace guard denies.
	if err := old.Stop(time.Minute); err != nil {
		t.Fatal(err)
	}
	startLockguard(ctx, t, env, wh)
	framework.Eventually(t, framework.DefaultTimeout, "namespace labelled", k.NamespaceLabelled(appNS, true))
	k.WaitActive(t, forge, mill1, mill2)
	k.WantGuardDenied(t, k.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, client.DryRunAll), webhook.GuardNamespace,
		framework.NamespaceDenialMessage(appNS, forge, mill1, mill2))
}
