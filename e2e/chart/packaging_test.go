package chart_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/navique/lockguard/e2e/framework"
)

// TestPlainManifest checks that deploy/lockguard.yaml is current: the chart
// with its default values, plus the namespace (make chart writes it; make
// verify-generated fails on a stale one too).
func TestPlainManifest(t *testing.T) {
	requireHelm(t)
	plain := readObjects(t, "deploy/lockguard.yaml")
	// Without helm's test hooks: kubectl apply users have no helm test.
	want := slices.DeleteFunc(render(t, framework.Release{IncludeCRDs: true}), func(o *unstructured.Unstructured) bool {
		return o.GetAnnotations()["helm.sh/hook"] == "test"
	})
	wantKinds := append(framework.Kinds(want), "Namespace/lockguard-system")
	slices.Sort(wantKinds)
	if diff := cmp.Diff(wantKinds, framework.Kinds(plain)); diff != "" {
		t.Errorf("deploy/lockguard.yaml objects: -want, +got:\n%s", diff)
	}
	for _, w := range want {
		g := framework.Find(plain, w.GetKind(), w.GetName())
		if g == nil {
			continue
		}
		if diff := cmp.Diff(w.Object, g.Object); diff != "" {
			t.Errorf("deploy/lockguard.yaml: %s %s is stale (run make chart): -chart, +file:\n%s", w.GetKind(), w.GetName(), diff)
		}
	}
}

// TestLint runs helm lint --strict for each mode.
func TestLint(t *testing.T) {
	requireHelm(t)
	for _, set := range [][]string{
		nil,
		{"mode=both"},
		{"lockGuard.enabled=false"},
		{"metrics.serviceMonitor.enabled=true"},
		append([]string{"networkPolicy.enabled=true"}, networkPolicySources...),
		{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls", "webhook.tls.caBundle=Y2E="},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := framework.Lint(ctx, framework.Release{KubeVersion: "1.37.2", Set: set})
		cancel()
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s", set, err, out)
		}
	}
}

// TestSubchart renders lockguard as the dependency of a parent chart, as
// umbrella charts use it: helm passes the parent's global values to it,
// which the strict schema must accept, and the parent's lockguard values
// reach it, still checked by the schema.
func TestSubchart(t *testing.T) {
	requireHelm(t)
	chart, err := framework.ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	if err := os.CopyFS(filepath.Join(parent, "charts", "lockguard"), os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"Chart.yaml": `apiVersion: v2
name: platform
version: 1.0.0
dependencies:
  - name: lockguard
    version: "*"
`,
		"values.yaml": `global:
  imageRegistry: registry.example
  labels:
    team: platform
lockguard:
  replicas: 3
`,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(parent, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	template := func(set ...string) ([]*unstructured.Unstructured, error) {
		args := []string{"template", "platform", parent, "--namespace", "ops", "--kube-version", "1.37.2"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		out, err := framework.Helm(ctx, args...)
		if err != nil {
			return nil, err
		}
		return framework.Decode(out)
	}

	objs, err := template("global.extra.nested=true")
	if err != nil {
		t.Fatalf("helm template of a parent chart with global values: %v", err)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "platform-lockguard"))
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas = %d; want 3, the parent's lockguard.replicas", *d.Spec.Replicas)
	}
	if framework.Find(objs, "ValidatingWebhookConfiguration", "platform-lockguard") == nil {
		t.Errorf("no webhook configuration rendered in the parent chart: %v", framework.Kinds(objs))
	}

	// The schema still checks the subchart's own values.
	_, err = template("lockguard.replica=1")
	if err == nil || !strings.Contains(err.Error(), "additional properties 'replica' not allowed") {
		t.Errorf("a typo in the parent's lockguard values: got %v; want the schema to refuse it", err)
	}
}

// TestChartMetadata checks that Chart.yaml's Artifact Hub annotations say
// what the chart does: the image it deploys by default, the CRD it ships
// (the example is checked by the API server in TestInstall), and
// well-formed change entries, and the license (Apache-2.0, as LICENSE).
func TestChartMetadata(t *testing.T) {
	requireHelm(t)
	meta := chartMetadata(t)
	annotation := func(key string, into any) {
		t.Helper()
		v, ok := meta.Annotations[key]
		if !ok {
			t.Fatalf("Chart.yaml has no annotation %s", key)
		}
		if err := yaml.UnmarshalStrict([]byte(v), into); err != nil {
			t.Fatalf("annotation %s: %v", key, err)
		}
	}

	var images []struct{ Name, Image string }
	annotation("artifacthub.io/images", &images)
	d := convert[appsv1.Deployment](t, framework.Find(render(t, framework.Release{}), "Deployment", "lockguard"))
	if len(images) != 1 || images[0].Image != d.Spec.Template.Spec.Containers[0].Image {
		t.Errorf("artifacthub.io/images = %+v; want the one image the chart deploys by default, %s", images, d.Spec.Template.Spec.Containers[0].Image)
	}

	var crds []struct{ Kind, Version, Name, DisplayName, Description string }
	annotation("artifacthub.io/crds", &crds)
	var shipped []string
	for _, o := range readObjects(t, "deploy/chart/lockguard/crds/core.navique.com_locks.yaml") {
		kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
		versions, _, _ := unstructured.NestedSlice(o.Object, "spec", "versions")
		for _, v := range versions {
			shipped = append(shipped, kind+"/"+v.(map[string]any)["name"].(string)+"/"+o.GetName())
		}
	}
	var annotated []string
	for _, c := range crds {
		annotated = append(annotated, c.Kind+"/"+c.Version+"/"+c.Name)
	}
	if diff := cmp.Diff(shipped, annotated); diff != "" {
		t.Errorf("artifacthub.io/crds: -crds/, +annotation:\n%s", diff)
	}

	var examples []map[string]any
	annotation("artifacthub.io/crdsExamples", &examples)
	if len(examples) != 1 || examples[0]["kind"] != "Lock" {
		t.Errorf("artifacthub.io/crdsExamples = %v; want one Lock", examples)
	}

	var changes []struct{ Kind, Description string }
	annotation("artifacthub.io/changes", &changes)
	for _, c := range changes {
		if !slices.Contains([]string{"added", "changed", "deprecated", "removed", "fixed", "security"}, c.Kind) || c.Description == "" {
			t.Errorf("artifacthub.io/changes entry %+v: want a kind Artifact Hub knows and a description", c)
		}
	}
	if license, err := os.ReadFile(repoFile(t, "LICENSE")); err != nil || !strings.Contains(string(license), "Apache License") || meta.Annotations["artifacthub.io/license"] != "Apache-2.0" {
		t.Errorf("artifacthub.io/license is %q; want Apache-2.0, the repository's LICENSE (%v)", meta.Annotations["artifacthub.io/license"], err)
	}
}

// chartYAML is what the tests read of the chart's Chart.yaml.
type chartYAML struct {
	Version     string
	AppVersion  string `json:"appVersion"`
	Annotations map[string]string
}

// chartMetadata reads the chart's Chart.yaml.
func chartMetadata(t *testing.T) chartYAML {
	t.Helper()
	var meta chartYAML
	data, err := os.ReadFile(repoFile(t, "deploy/chart/lockguard/Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	return meta
}

// TestHelmTestPod checks the helm test hook: a Pod of the lockguard image
// that runs lockguard check-webhook against the webhook Service, verifying
// its certificate with the serving certificate's CA (and only the CA: not
// the key), selected by none of the selectors of lockguard's pods, so that
// the Service never sends the API server's calls to it. (TestInstall
// creates it in a namespace that enforces the restricted Pod Security
// Standard; TestCheckWebhook runs the subcommand against lockguard.)
func TestHelmTestPod(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{Name: "guard", Namespace: "ops", Set: []string{"webhook.servicePort=8443", "image.tag=v9"}})
	pod := convert[corev1.Pod](t, framework.Find(objs, "Pod", "guard-lockguard-test-webhook"))
	if pod.Annotations["helm.sh/hook"] != "test" {
		t.Errorf("annotations %v; want helm.sh/hook: test", pod.Annotations)
	}
	if pod.Spec.RestartPolicy != corev1.RestartPolicyNever || pod.Spec.AutomountServiceAccountToken == nil || *pod.Spec.AutomountServiceAccountToken {
		t.Errorf("restartPolicy %s, automountServiceAccountToken %v; want Never and false (it needs no API access)", pod.Spec.RestartPolicy, pod.Spec.AutomountServiceAccountToken)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "guard-lockguard"))
	c := pod.Spec.Containers[0]
	if c.Image != d.Spec.Template.Spec.Containers[0].Image || len(c.Command) != 0 {
		t.Errorf("image %s, command %v; want lockguard's image %s and its entrypoint", c.Image, c.Command, d.Spec.Template.Spec.Containers[0].Image)
	}
	wantArgs := []string{
		"check-webhook",
		"--url=https://guard-lockguard-webhook.ops.svc:8443/validate-delete",
		"--namespace=ops",
		"--timeout=5s",
		"--ca-file=/etc/lockguard/ca/ca.crt",
	}
	if diff := cmp.Diff(wantArgs, c.Args); diff != "" {
		t.Errorf("args: -want, +got:\n%s", diff)
	}
	serving := framework.Find(objs, "Certificate", "guard-lockguard-serving")
	secretName, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName")
	wantVolumes := []corev1.Volume{{Name: "ca", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
		SecretName: secretName, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}}}}
	if diff := cmp.Diff(wantVolumes, pod.Spec.Volumes); diff != "" {
		t.Errorf("volumes: -want, +got:\n%s", diff)
	}
	if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/lockguard/ca" || !c.VolumeMounts[0].ReadOnly {
		t.Errorf("volumeMounts %+v; want the CA read-only at /etc/lockguard/ca", c.VolumeMounts)
	}
	for _, o := range objs {
		var selector map[string]string
		switch o.GetKind() {
		case "Service":
			selector = convert[corev1.Service](t, o).Spec.Selector
		case "Deployment":
			selector = convert[appsv1.Deployment](t, o).Spec.Selector.MatchLabels
		case "PodDisruptionBudget":
			selector, _, _ = unstructured.NestedStringMap(o.Object, "spec", "selector", "matchLabels")
		default:
			continue
		}
		if labels.SelectorFromSet(selector).Matches(labels.Set(pod.Labels)) {
			t.Errorf("%s %s selects the helm test Pod (labels %v)", o.GetKind(), o.GetName(), pod.Labels)
		}
	}

	// Without cert-manager: the CA is webhook.tls.caBundle.
	objs = render(t, framework.Release{Name: "guard", Namespace: "ops",
		Set: []string{"certManager.enabled=false", "webhook.tls.existingSecret=my-tls"}, SetString: []string{"webhook.tls.caBundle=Y2E="}})
	pod = convert[corev1.Pod](t, framework.Find(objs, "Pod", "guard-lockguard-test-webhook"))
	if !slices.Contains(pod.Spec.Containers[0].Args, "--ca-bundle=Y2E=") || len(pod.Spec.Volumes) != 0 {
		t.Errorf("args %v, volumes %v; want --ca-bundle=Y2E= and no volume", pod.Spec.Containers[0].Args, pod.Spec.Volumes)
	}
}
