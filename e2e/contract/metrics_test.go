package contract_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// TestMetricsRefusesStrangers: the metrics endpoint answers 401 to a
// caller without a token or with a token the API server does not know, 403
// to an authenticated caller RBAC does not allow to get /metrics, and the
// metrics to one it allows.
func TestMetricsRefusesStrangers(t *testing.T) {
	inProcess(t)
	scraper, nobody := kube.ScraperTokens(t)

	c := metricsEndpoint().httpClient()
	scrape := func(authorization string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, "https://"+suite.metrics+"/metrics", nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("scraping: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The authorizer caches a denial for 30s: wait longer than that, in case
	// the first scrape came before the binding reached the API server's
	// RBAC cache.
	if err := waitFor(45*time.Second, func() error {
		if code, body := scrape("Bearer " + scraper); code != http.StatusOK || !strings.Contains(body, "lockguard_admission_reviews_total") {
			return fmt.Errorf("HTTP %d", code)
		}
		return nil
	}); err != nil {
		t.Fatalf("the authorized scraper cannot scrape: %v", err)
	}
	for _, tc := range []struct {
		name, authorization string
		want                int
	}{
		{"NoToken", "", http.StatusUnauthorized},
		{"UnknownToken", "Bearer not-a-token", http.StatusUnauthorized},
		{"BasicAuth", "Basic YWRtaW46YWRtaW4=", http.StatusUnauthorized},
		{"Unauthorized", "Bearer " + nobody, http.StatusForbidden},
	} {
		if code, body := scrape(tc.authorization); code != tc.want || strings.Contains(body, "lockguard_") {
			t.Errorf("%s: HTTP %d %.200q, want %d without metrics", tc.name, code, body, tc.want)
		}
	}
}

// counterSum is the sum of the counters name of lockguard in this process
// whose labels include labels.
func counterSum(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			matched := 0
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
					matched++
				}
			}
			if matched == len(labels) {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}
