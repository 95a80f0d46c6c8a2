package transport

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	ctrlwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"
)

// TestWebhookMetrics: Server.Register counts its handlers in
// controller-runtime's own webhook metrics, as controller-runtime's
// server counts them: the same requests, served at one path through each,
// give the same series (codes, counts, the latency's count, in flight).
func TestWebhookMetrics(t *testing.T) {
	if _, ok := registeredWebhookMetrics(ctrlmetrics.Registry); !ok {
		t.Fatal("controller-runtime's webhook metrics are not the ones lockguard counts in: its metrics changed (sigs.k8s.io/controller-runtime/pkg/webhook/internal/metrics)")
	}
	answers := map[string]http.HandlerFunc{
		"write":   func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) },
		"nothing": func(http.ResponseWriter, *http.Request) {},
		"refused": func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "busy", http.StatusTooManyRequests) },
		"failed":  func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) },
	}
	handler := func(w http.ResponseWriter, r *http.Request) { answers[r.URL.Query().Get("answer")](w, r) }
	ours := NewServer(ServerOptions{})
	ours.Register("/metrics-test-lockguard", http.HandlerFunc(handler))
	theirs := ctrlwebhook.NewServer(ctrlwebhook.Options{})
	theirs.Register("/metrics-test-controller-runtime", http.HandlerFunc(handler))
	for _, answer := range []string{"write", "write", "nothing", "refused", "failed", "refused", "write"} {
		for _, s := range []struct {
			mux  *http.ServeMux
			path string
		}{{ours.WebhookMux(), "/metrics-test-lockguard"}, {theirs.WebhookMux(), "/metrics-test-controller-runtime"}} {
			w := httptest.NewRecorder()
			s.mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, s.path+"?answer="+answer, nil))
		}
	}
	got, want := webhookSeries(t, "/metrics-test-lockguard"), webhookSeries(t, "/metrics-test-controller-runtime")
	if len(want) == 0 {
		t.Fatal("controller-runtime counted nothing")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lockguard's series differ from controller-runtime's (-controller-runtime +lockguard):\n%s", diff)
	}
}

// webhookSeries returns the values of controller-runtime's webhook
// metrics for path, by metric and code (for the latency, its count).
func webhookSeries(t *testing.T, path string) map[string]float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["webhook"] != path {
				continue
			}
			key := f.GetName() + "{" + labels["code"] + "}"
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}
