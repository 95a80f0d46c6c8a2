package contract_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestEvents: a denied delete records a DeleteBlocked Warning on the target
// and on each Lock, naming the user and the Locks; a dry-run denial records
// nothing; Lock status changes record Events too.
func TestEvents(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "events")
	early := kube.CreateLock(t, framework.NewLock(ns, "early", "Stack", "forge", ""))
	kube.WaitLockStatus(t, early, framework.MissingStatus(early))
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	second := kube.CreateLock(t, framework.NewLock(ns, "second", "Stack", "forge", ""))
	kube.WaitActive(t, early, second)

	alice, err := suite.env.UserConfig("alice", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	aliceClient, err := client.New(alice, client.Options{Scheme: kube.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	// A dry run first: it must record nothing.
	if err := aliceClient.Delete(context.Background(), framework.Object(framework.StackGVK, ns, "forge"), client.DryRunAll); err == nil {
		t.Fatal("dry-run delete of a locked Stack was allowed")
	}
	if err := aliceClient.Delete(context.Background(), framework.Object(framework.StackGVK, ns, "forge")); err == nil {
		t.Fatal("delete of a locked Stack was allowed")
	}

	type ev struct{ Kind, Name, Type, Reason, Note string }
	want := []ev{
		{"Lock", "early", "Normal", "Active", `deleting Stack "forge" is denied while this Lock exists`},
		{"Lock", "early", "Warning", "DeleteBlocked", `Denied the DELETE of Stack "forge" by alice`},
		{"Lock", "early", "Warning", "MissingReference", `Stack "forge" not found in namespace "` + ns + `"; its deletion will be denied as soon as it is created`},
		{"Lock", "second", "Normal", "Active", `deleting Stack "forge" is denied while this Lock exists`},
		{"Lock", "second", "Warning", "DeleteBlocked", `Denied the DELETE of Stack "forge" by alice`},
		{"Stack", "forge", "Warning", "DeleteBlocked", "DELETE by alice denied: protected by Lock(s) early, second"},
	}
	var got []ev
	framework.Eventually(t, framework.DefaultTimeout, "the Events are recorded", func(context.Context) error {
		var list eventsv1.EventList
		if err := kube.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		got = got[:0]
		for _, e := range list.Items {
			got = append(got, ev{e.Regarding.Kind, e.Regarding.Name, e.Type, e.Reason, e.Note})
		}
		slices.SortFunc(got, func(a, b ev) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("Events:\n%v\nwant\n%v", got, want)
		}
		return nil
	})

	// Repeated attempts aggregate into a series rather than flood.
	for range 3 {
		if err := aliceClient.Delete(context.Background(), framework.Object(framework.StackGVK, ns, "forge")); err == nil {
			t.Fatal("delete of a locked Stack was allowed")
		}
	}
	framework.Eventually(t, framework.DefaultTimeout, "repeated denials form one Event series on the Stack", func(context.Context) error {
		var list eventsv1.EventList
		if err := kube.Client.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return err
		}
		var onStack []eventsv1.Event
		for _, e := range list.Items {
			if e.Regarding.Kind == "Stack" && e.Reason == "DeleteBlocked" {
				onStack = append(onStack, e)
			}
		}
		if len(onStack) != 1 {
			return fmt.Errorf("%d DeleteBlocked Events on the Stack, want 1", len(onStack))
		}
		if onStack[0].Series == nil || onStack[0].Series.Count < 2 {
			return fmt.Errorf("the DeleteBlocked Event has series %+v, want a count of at least 2", onStack[0].Series)
		}
		return nil
	})

	// kubectl describe shows why the Stack still exists.
	r := kube.Kubectl(t, "", "describe", "stack", "forge", "-n", ns)
	if r.Code != 0 {
		t.Fatalf("kubectl describe: exit %d: %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stdout, "DeleteBlocked") || !strings.Contains(r.Stdout, "DELETE by alice denied: protected by Lock(s) early, second") {
		t.Errorf("kubectl describe stack does not show the DeleteBlocked Event:\n%s", r.Stdout)
	}
}

// TestPrometheus scrapes lockguard's HTTPS metrics endpoint with a real
// Prometheus server that authenticates with a ServiceAccount token, and
// waits until the denial counters show a denied, a dry-run denied and an
// allowed delete. Unauthenticated and unauthorized scrapes are refused.
func TestPrometheus(t *testing.T) {
	inProcess(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("LOCKGUARD_REQUIRE_PROMETHEUS") == "1" {
			t.Fatalf("prometheus is not on PATH (make puts the pinned one in bin/path): %v", err)
		}
		t.Skipf("prometheus is not installed: %v", err)
	}
	ctx := context.Background()
	// A scraper identity allowed to GET /metrics, and one that is not.
	promToken, nobodyToken := kube.ScraperTokens(t)

	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // lockguard's self-signed metrics certificate
	scrape := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, "https://"+suite.metrics+"/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := insecure.Do(req)
		if err != nil {
			t.Fatalf("scraping: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	framework.Eventually(t, framework.DefaultTimeout, "the authorized scraper can scrape", func(context.Context) error {
		if code := scrape(promToken); code != http.StatusOK {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	})
	if code := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("unauthenticated scrape: HTTP %d, want 401", code)
	}
	if code := scrape(nobodyToken); code != http.StatusForbidden {
		t.Errorf("unauthorized scrape: HTTP %d, want 403", code)
	}

	// A denied, a dry-run denied and an allowed delete.
	ns := kube.NewNamespace(t, "scraped")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	kube.CreateObject(t, framework.StackGVK, ns, "free")
	kube.WaitActive(t, kube.CreateLock(t, framework.NewLock(ns, "guard", "Stack", "forge", "")))
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns, "forge"); err == nil {
		t.Fatal("locked delete allowed")
	}
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns, "forge", client.DryRunAll); err == nil {
		t.Fatal("locked dry-run delete allowed")
	}
	if err := kube.DeleteObject(ctx, framework.StackGVK, ns, "free"); err != nil {
		t.Fatalf("unlocked delete: %v", err)
	}

	// Prometheus, scraping every second with the token.
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(promToken), 0o600); err != nil {
		t.Fatal(err)
	}
	promPort, err := framework.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
scrape_configs:
- job_name: lockguard
  scheme: https
  tls_config:
    insecure_skip_verify: true
  authorization:
    credentials_file: %s
  static_configs:
  - targets: ["%s"]
`, tokenFile, suite.metrics)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := exec.Command(promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), fmt.Sprintf("--web.listen-address=127.0.0.1:%d", promPort))
	if os.Getenv("LOCKGUARD_KUBE_LOGS") == "1" {
		prom.Stdout, prom.Stderr = os.Stderr, os.Stderr
	}
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = prom.Process.Kill(); _ = prom.Wait() })

	query := func(q string) (map[string]string, error) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/query?query=%s", promPort, url.QueryEscape(q)))
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var r struct {
			Status string
			Data   struct {
				Result []struct {
					Metric map[string]string
					Value  [2]any
				}
			}
		}
		if err := json.Unmarshal(body, &r); err != nil {
			return nil, fmt.Errorf("%v: %s", err, body)
		}
		out := map[string]string{}
		for _, res := range r.Data.Result {
			out[res.Metric["dry_run"]+res.Metric["decision"]] = fmt.Sprint(res.Value[1])
		}
		return out, nil
	}
	q := fmt.Sprintf(`lockguard_delete_denied_total{job="lockguard",namespace=%q,group="core.navique.com",kind="Stack"}`, ns)
	waitProm := func(q string, want map[string]string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := query(q)
			if err == nil && fmt.Sprint(got) == fmt.Sprint(want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Prometheus query %s: got %v (err %v), want %v", q, got, err, want)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	waitProm(q, map[string]string{"false": "1", "true": "1"})
	waitProm(`lockguard_locks{job="lockguard",state="active"} > 0`, map[string]string{"": fmt.Sprint(activeLocks(t))})
	// Eight guards (object, cascade, namespace, crd, readonly,
	// clusterlock; create, clustercreate), three decisions each.
	waitProm(`count(lockguard_admission_reviews_total{job="lockguard"})`, map[string]string{"": "24"})
	waitProm(`count(lockguard_admission_duration_seconds_bucket{job="lockguard"}) > 10`, map[string]string{"": "14"})
	waitProm(`lockguard_serving_certificate_expiry_timestamp_seconds{job="lockguard"} > time()`, map[string]string{"": expiry(t)})
}

// activeLocks counts the active Locks in the whole test API server.
func activeLocks(t *testing.T) int {
	var list lockv1alpha1.LockList
	if err := kube.Client.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range list.Items {
		if l.Status.Active {
			n++
		}
	}
	return n
}

// expiry returns the NotAfter of the suite's webhook certificate, as
// Prometheus prints it.
func expiry(t *testing.T) string {
	conn, err := tls.Dial("tcp", suite.webhook.Address(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reading the served certificate
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return fmt.Sprint(conn.ConnectionState().PeerCertificates[0].NotAfter.Unix())
}
