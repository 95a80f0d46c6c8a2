package transport

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// webhookMetrics are controller-runtime's metrics of its webhook server,
// which it registers in its registry (ctrlmetrics.Registry) when its
// webhook package loads, and which operators scrape:
// controller_runtime_webhook_latency_seconds{webhook},
// controller_runtime_webhook_requests_total{webhook,code} and
// controller_runtime_webhook_requests_in_flight{webhook}.
type webhookMetrics struct {
	latency  *prometheus.HistogramVec
	total    *prometheus.CounterVec
	inFlight *prometheus.GaugeVec
}

// registeredWebhookMetrics returns controller-runtime's webhook metrics as
// reg holds them: registering collectors of the same names, help and
// labels answers with the ones registered (prometheus.AlreadyRegisteredError).
// It returns false when reg holds them not, or different ones (another
// controller-runtime's).
func registeredWebhookMetrics(reg prometheus.Registerer) (*webhookMetrics, bool) {
	var m webhookMetrics
	var ok bool
	if m.latency, ok = registered[*prometheus.HistogramVec](reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "controller_runtime_webhook_latency_seconds",
		Help: "Histogram of the latency of processing admission requests",
	}, []string{"webhook"})); !ok {
		return nil, false
	}
	if m.total, ok = registered[*prometheus.CounterVec](reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "controller_runtime_webhook_requests_total",
		Help: "Total number of admission requests by HTTP status code.",
	}, []string{"webhook", "code"})); !ok {
		return nil, false
	}
	if m.inFlight, ok = registered[*prometheus.GaugeVec](reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "controller_runtime_webhook_requests_in_flight",
		Help: "Current number of admission requests being served.",
	}, []string{"webhook"})); !ok {
		return nil, false
	}
	return &m, true
}

// registered returns the collector of reg that c duplicates, if it is a T.
// c itself is never registered: if reg takes it, it is unregistered.
func registered[T prometheus.Collector](reg prometheus.Registerer, c T) (T, bool) {
	var are prometheus.AlreadyRegisteredError
	err := reg.Register(c)
	if err == nil {
		reg.Unregister(c)
	}
	if errors.As(err, &are) {
		existing, ok := are.ExistingCollector.(T)
		return existing, ok
	}
	var zero T
	return zero, false
}

// instrument returns h counted in m under path, as controller-runtime's
// webhook server counts its handlers (its metrics.InstrumentedHook:
// promhttp's InstrumentHandlerDuration, InstrumentHandlerCounter and
// InstrumentHandlerInFlight), with the series of path resolved once: the
// same series and values, without promhttp's labels map, lookups and
// response writer per request (issue 38: they were about 4% of the
// webhook server's CPU under load).
func (m *webhookMetrics) instrument(path string, h http.Handler) http.Handler {
	latency := m.latency.WithLabelValues(path)
	inFlight := m.inFlight.WithLabelValues(path)
	codes := m.total.MustCurryWith(prometheus.Labels{"webhook": path})
	// As controller-runtime, the likeliest codes are there from the start.
	ok := codes.WithLabelValues("200")
	codes.WithLabelValues("500")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		func() {
			inFlight.Inc()
			defer inFlight.Dec()
			h.ServeHTTP(sw, r)
		}()
		if code := sw.code; code == 0 || code == http.StatusOK {
			ok.Inc()
		} else {
			codes.WithLabelValues(strconv.Itoa(code)).Inc()
		}
		latency.Observe(time.Since(start).Seconds())
	})
}

// statusWriter records the status code of its answer (0: none written,
// which net/http answers as 200).
type statusWriter struct {
	http.ResponseWriter
	code int
}

// WriteHeader records code and writes it.
func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write writes p, the status 200 if none was written.
func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush flushes the answer, when the writer it wraps can.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the writer it wraps, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
