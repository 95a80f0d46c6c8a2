package chart_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/navique/lockguard/e2e/framework"
)

// TestMonitoring checks the chart's PrometheusRule and dashboard: they are
// the alerts of files/monitoring (with the job label of this release's
// metrics Service, which the ServiceMonitor's scrapes carry) and its
// dashboard, and the rendered rules pass promtool.
func TestMonitoring(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{Name: "guard", Set: []string{"metrics.prometheusRule.enabled=true", "metrics.dashboard.enabled=true"}})

	rule := framework.Find(objs, "PrometheusRule", "guard-lockguard")
	if rule == nil {
		t.Fatalf("no PrometheusRule guard-lockguard in %v", framework.Kinds(objs))
	}
	src, err := os.ReadFile(repoFile(t, "deploy/chart/lockguard/files/monitoring/alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := yaml.Unmarshal([]byte(strings.ReplaceAll(string(src), `job="lockguard-metrics"`, `job="guard-lockguard-metrics"`)), &want); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, rule.Object["spec"]); diff != "" {
		t.Errorf("PrometheusRule spec: -files/monitoring/alerts.yaml (job relabelled), +rendered:\n%s", diff)
	}
	if svc := framework.Find(objs, "Service", "guard-lockguard-metrics"); svc == nil {
		t.Errorf("the alerts select job=\"guard-lockguard-metrics\" but no such Service is rendered")
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil && os.Getenv("LOCKGUARD_REQUIRE_PROMETHEUS") == "1" {
		t.Errorf("promtool is not on PATH (make puts the pinned one in bin/path): %v", err)
	}
	if err == nil {
		spec, err := yaml.Marshal(rule.Object["spec"])
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(t.TempDir(), "rules.yaml")
		if err := os.WriteFile(f, spec, 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules on the rendered PrometheusRule: %v\n%s", err, out)
		}
	}

	dash := framework.Find(objs, "ConfigMap", "guard-lockguard-dashboard")
	if dash == nil {
		t.Fatal("no dashboard ConfigMap")
	}
	if got := dash.GetLabels()["grafana_dashboard"]; got != "1" {
		t.Errorf("dashboard ConfigMap label grafana_dashboard=%q, want \"1\" (Grafana's sidecar selects on it)", got)
	}
	dashJSON, err := os.ReadFile(repoFile(t, "deploy/chart/lockguard/files/monitoring/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := dash.Object["data"].(map[string]any)
	if diff := cmp.Diff(string(dashJSON), data["lockguard.json"]); diff != "" {
		t.Errorf("dashboard ConfigMap: -files/monitoring/dashboard.json, +rendered:\n%s", diff)
	}
}

// TestDashboardJSON checks that the chart's files/monitoring/dashboard.json
// is one well-formed JSON object, a Grafana dashboard with a title, a uid
// and panels.
func TestDashboardJSON(t *testing.T) {
	data, err := os.ReadFile(repoFile(t, "deploy/chart/lockguard/files/monitoring/dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var dash struct {
		Title, UID string
		Panels     []json.RawMessage
	}
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("dashboard.json: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Errorf("dashboard.json: more after the first JSON value (%v)", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Errorf("dashboard.json: title %q, uid %q, %d panels: want all three", dash.Title, dash.UID, len(dash.Panels))
	}
}

// TestServiceMonitor checks how the ServiceMonitor scrapes lockguard: over
// TLS verified against the serving certificate's CA for a name the
// certificate holds (lockguard serves metrics with the webhook's
// certificate), and with prometheus-operator's authorization field and a
// token of an identity allowed to get /metrics, not the deprecated
// bearerTokenFile or insecureSkipVerify.
func TestServiceMonitor(t *testing.T) {
	requireHelm(t)
	endpoint := func(objs []*unstructured.Unstructured) map[string]any {
		t.Helper()
		sm := framework.Find(objs, "ServiceMonitor", "guard-lockguard")
		if sm == nil {
			t.Fatalf("no ServiceMonitor guard-lockguard in %v", framework.Kinds(objs))
		}
		eps, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("ServiceMonitor endpoints = %v; want one", eps)
		}
		ep := eps[0].(map[string]any)
		for _, deprecated := range []string{"bearerTokenFile", "bearerTokenSecret"} {
			if _, ok := ep[deprecated]; ok {
				t.Errorf("the endpoint sets the deprecated %s", deprecated)
			}
		}
		return ep
	}
	str := func(m map[string]any, path ...string) string {
		t.Helper()
		v, _, err := unstructured.NestedString(m, path...)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	objs := render(t, framework.Release{Name: "guard", Namespace: "ops", Set: []string{"metrics.serviceMonitor.enabled=true"}})
	ep := endpoint(objs)
	serving := framework.Find(objs, "Certificate", "guard-lockguard-serving")
	secretName, _, _ := unstructured.NestedString(serving.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(serving.Object, "spec", "dnsNames")
	wantTLS := map[string]any{
		"ca":         map[string]any{"secret": map[string]any{"name": secretName, "key": "ca.crt"}},
		"serverName": "guard-lockguard-webhook.ops.svc",
	}
	if diff := cmp.Diff(wantTLS, ep["tlsConfig"]); diff != "" {
		t.Errorf("tlsConfig: -want, +got:\n%s", diff)
	}
	if !slices.Contains(dnsNames, str(ep, "tlsConfig", "serverName")) {
		t.Errorf("serverName %s is not one of the serving certificate's dnsNames %v", str(ep, "tlsConfig", "serverName"), dnsNames)
	}
	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "guard-lockguard"))
	if mount := d.Spec.Template.Spec.Containers[0].VolumeMounts[0]; !slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--metrics-cert-dir="+mount.MountPath) ||
		d.Spec.Template.Spec.Volumes[0].Secret.SecretName != secretName {
		t.Errorf("lockguard args %v: want --metrics-cert-dir at the mount of Secret %s", d.Spec.Template.Spec.Containers[0].Args, secretName)
	}
	wantAuth := map[string]any{"type": "Bearer", "credentials": map[string]any{"name": "guard-lockguard-metrics-scraper", "key": "token"}}
	if diff := cmp.Diff(wantAuth, ep["authorization"]); diff != "" {
		t.Errorf("authorization: -want, +got:\n%s", diff)
	}
	token := convert[corev1.Secret](t, framework.Find(objs, "Secret", "guard-lockguard-metrics-scraper"))
	if token.Type != corev1.SecretTypeServiceAccountToken || token.Annotations[corev1.ServiceAccountNameKey] != "guard-lockguard-metrics-scraper" {
		t.Errorf("token Secret: type %s, annotations %v; want a service-account-token of guard-lockguard-metrics-scraper", token.Type, token.Annotations)
	}
	crb := convert[rbacv1.ClusterRoleBinding](t, framework.Find(objs, "ClusterRoleBinding", "guard-lockguard-metrics-scraper"))
	wantSubjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "guard-lockguard-metrics-scraper", Namespace: "ops"}}
	if crb.RoleRef.Name != "guard-lockguard-metrics-reader" || !cmp.Equal(wantSubjects, crb.Subjects) {
		t.Errorf("scraper binding: roleRef %v, subjects %v; want guard-lockguard-metrics-reader for %v", crb.RoleRef, crb.Subjects, wantSubjects)
	}

	// Without cert-manager: the CA of webhook.tls.caBundle, in a ConfigMap.
	const caPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	objs = render(t, framework.Release{Name: "guard", Namespace: "ops",
		Set:       []string{"metrics.serviceMonitor.enabled=true", "certManager.enabled=false", "webhook.tls.existingSecret=my-tls"},
		SetString: []string{"webhook.tls.caBundle=" + base64.StdEncoding.EncodeToString([]byte(caPEM))}})
	ep = endpoint(objs)
	if got := str(ep, "tlsConfig", "ca", "configMap", "name"); got != "guard-lockguard-metrics-ca" || str(ep, "tlsConfig", "ca", "configMap", "key") != "ca.crt" {
		t.Errorf("tlsConfig.ca = %v; want ConfigMap guard-lockguard-metrics-ca key ca.crt", ep["tlsConfig"])
	}
	cm := convert[corev1.ConfigMap](t, framework.Find(objs, "ConfigMap", "guard-lockguard-metrics-ca"))
	if cm.Data["ca.crt"] != caPEM {
		t.Errorf("ConfigMap ca.crt = %q; want the decoded webhook.tls.caBundle %q", cm.Data["ca.crt"], caPEM)
	}
	// The same CA authenticates the replicas to each other.
	peerCA := convert[corev1.ConfigMap](t, framework.Find(objs, "ConfigMap", "guard-lockguard-peer-ca"))
	if peerCA.Data["ca.crt"] != caPEM {
		t.Errorf("peer CA ConfigMap ca.crt = %q; want the decoded webhook.tls.caBundle %q", peerCA.Data["ca.crt"], caPEM)
	}
	dep := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "guard-lockguard"))
	if args := dep.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--peer-ca-file=/etc/lockguard/peer-ca/ca.crt") {
		t.Errorf("lockguard args %v; want --peer-ca-file=/etc/lockguard/peer-ca/ca.crt", args)
	}
	if vols := dep.Spec.Template.Spec.Volumes; !slices.ContainsFunc(vols, func(v corev1.Volume) bool {
		return v.ConfigMap != nil && v.ConfigMap.Name == "guard-lockguard-peer-ca"
	}) {
		t.Errorf("volumes %+v; want the ConfigMap guard-lockguard-peer-ca", vols)
	}

	// The user's TLS settings and token replace the chart's.
	objs = render(t, framework.Release{Name: "guard", Namespace: "ops", Set: []string{"metrics.serviceMonitor.enabled=true",
		"metrics.serviceMonitor.tlsConfig.serverName=metrics.example", "metrics.serviceMonitor.tlsConfig.ca.secret.name=corp-ca",
		"metrics.serviceMonitor.tlsConfig.ca.secret.key=bundle.pem",
		"metrics.serviceMonitor.authorization.secretName=prom-token", "metrics.serviceMonitor.authorization.key=jwt"}})
	ep = endpoint(objs)
	wantTLS = map[string]any{"ca": map[string]any{"secret": map[string]any{"name": "corp-ca", "key": "bundle.pem"}}, "serverName": "metrics.example"}
	if diff := cmp.Diff(wantTLS, ep["tlsConfig"]); diff != "" {
		t.Errorf("user tlsConfig: -want, +got:\n%s", diff)
	}
	if str(ep, "authorization", "credentials", "name") != "prom-token" || str(ep, "authorization", "credentials", "key") != "jwt" {
		t.Errorf("authorization = %v; want the user's Secret prom-token, key jwt", ep["authorization"])
	}
}
