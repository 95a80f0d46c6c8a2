package chart_test

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
