//go:build release

package release_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// TestHelmInstall installs the packaged chart with the README's commands
// (installAsREADME), with its default values, on a real kube-apiserver
// (with cert-manager's CRDs, as a cluster with cert-manager has), and
// checks that the release holds the
// objects that the chart directory renders (helm template) for the same
// release, but for the version labels, which name the release's version;
// that every one of them, and the Lock CRD, exists on the API server; and
// that every file of the package is the chart directory's.
func TestHelmInstall(t *testing.T) {
	r := releaseUnderTest(t)
	if _, err := framework.HelmPath(); err != nil {
		t.Fatal(err)
	}
	checkPackagedFiles(t, r)

	ctx := t.Context()
	certManagerCRDs, err := framework.CertManagerCRDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{CRDDirs: []string{certManagerCRDs}})
	kubeconfig := filepath.Join(env.Dir, "helm.kubeconfig")
	if err := framework.WriteKubeconfig(env.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	const release, ns = "lockguard", "lockguard-system"
	helm := func(args ...string) []*unstructured.Unstructured {
		t.Helper()
		out, err := framework.Helm(ctx, append(args, "--namespace", ns, "--kubeconfig", kubeconfig)...)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := framework.Decode(out)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	start := time.Now()
	installAsREADME(t, r, kubeconfig)
	t.Logf("the README's install commands, lockguard-%s.tgz: %v", r.chart, time.Since(start).Round(time.Millisecond))
	installed := append(helm("get", "manifest", release), helm("get", "hooks", release)...)

	kubeVersion, apiVersions, err := framework.Capabilities(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := framework.Render(ctx, framework.Release{Name: release, Namespace: ns,
		KubeVersion: kubeVersion, APIVersions: apiVersions, Set: []string{"image.tag=" + r.chart}})
	if err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"helm.sh/chart": "lockguard-" + r.chart, "app.kubernetes.io/version": r.chart}
	want, got := byName(rendered), byName(installed)
	for _, o := range want {
		setLabels(o.Object, labels)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("helm install of lockguard-%s.tgz: -want (the chart directory, rendered), +got (the release):\n%s", r.chart, diff)
	}
	t.Logf("the release holds the %d objects the chart directory renders: %s", len(got), strings.Join(framework.Kinds(installed), " "))

	c, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range installed {
		if o.GetAnnotations()["helm.sh/hook"] != "" {
			continue // a hook is created when it runs (helm test)
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(o.GroupVersionKind())
		key := client.ObjectKey{Name: o.GetName()}
		if namespaced, err := c.IsObjectNamespaced(u); err != nil {
			t.Fatal(err)
		} else if namespaced {
			key.Namespace = ns
		}
		if err := c.Get(ctx, key, u); err != nil {
			t.Errorf("%s %s of the release: %v", o.GetKind(), key, err)
		}
	}
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err = client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "locks.core.navique.com"}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
		t.Errorf("the Lock CRD (the chart's crds/): %v", err)
	}
}

// installAsREADME runs the README's chart commands as they stand there
// (make release-check writes them into the file LOCKGUARD_RELEASE_INSTALL)
// in the release's directory, with VERSION set as the README asks, the
// pinned helm and kubectl and the control plane's kubeconfig, up to
// kubectl rollout status: the control plane has no nodes, so no pod ever
// starts (make e2e-kind runs the image).
func installAsREADME(t *testing.T, r release, kubeconfig string) {
	t.Helper()
	file := os.Getenv("LOCKGUARD_RELEASE_INSTALL")
	if file == "" {
		t.Fatal("set LOCKGUARD_RELEASE_INSTALL to the README's chart commands (make release-check does)")
	}
	block, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	for _, line := range strings.Split(strings.TrimSpace(string(block)), "\n") {
		if strings.Contains(line, "rollout status") {
			break
		}
		script = append(script, line)
	}
	if !slices.ContainsFunc(script, func(l string) bool { return strings.HasPrefix(l, "helm install ") }) {
		t.Fatalf("%s: no helm install before rollout status:\n%s", file, block)
	}
	helm, err := framework.HelmPath()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, target := range map[string]string{"helm": helm, "kubectl": kubectl} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", strings.Join(script, "\n"))
	cmd.Dir = r.dist
	// Only these tools, and helm kept away from $HOME.
	cmd.Env = []string{"PATH=" + dir + ":/usr/bin:/bin", "HOME=" + dir, "KUBECONFIG=" + kubeconfig, "VERSION=" + r.version,
		"HELM_CACHE_HOME=" + filepath.Join(dir, "cache"), "HELM_CONFIG_HOME=" + filepath.Join(dir, "config"), "HELM_DATA_HOME=" + filepath.Join(dir, "data")}
	out, err := cmd.CombinedOutput()
	t.Logf("the README's chart commands, up to rollout status:\n%s\n%s", strings.Join(script, "\n"), out)
	if err != nil {
		t.Fatalf("the README's chart commands: %v", err)
	}
}

// byName keys objects by kind, namespace and name.
func byName(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o
	}
	return m
}

// setLabels sets the labels' values wherever a map (labels of an object,
// of a pod template, of a selector) has one of their keys.
func setLabels(v any, labels map[string]string) {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if want, ok := labels[k]; ok {
				if _, isString := x.(string); isString {
					v[k] = want
					continue
				}
			}
			setLabels(x, labels)
		}
	case []any:
		for _, x := range v {
			setLabels(x, labels)
		}
	}
}

// checkPackagedFiles checks that every file of the packaged chart but
// Chart.yaml (which helm package rewrites with the release's version) is
// the chart directory's, and that the package leaves out only what
// .helmignore names.
func checkPackagedFiles(t *testing.T, r release) {
	t.Helper()
	dir, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	packaged := map[string]bool{}
	for name, f := range r.chartFiles(t) {
		rel := strings.TrimPrefix(name, "lockguard/")
		packaged[rel] = true
		if rel == "Chart.yaml" {
			continue
		}
		want, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Errorf("the package holds %s, which the chart directory does not: %v", rel, err)
			continue
		}
		if !bytes.Equal(want, f.data) {
			t.Errorf("the package's %s differs from the chart directory's", rel)
		}
	}
	var left []string
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if !packaged[rel] {
			left = append(left, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ignore, err := os.ReadFile(filepath.Join(dir, ".helmignore"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range left {
		if rel != ".helmignore" && !bytes.Contains(ignore, []byte("\n"+rel+"\n")) {
			t.Errorf("the package leaves out %s, which .helmignore does not name", rel)
		}
	}
	t.Logf("the package holds %d files of the chart directory; left out: %s", len(packaged), strings.Join(left, " "))
}
