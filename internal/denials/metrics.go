package denials

import "github.com/prometheus/client_golang/prometheus"

// Results counted by lockguard_denial_status_writes_total.
const (
	resultWritten  = "written"
	resultConflict = "conflict"
	resultGone     = "gone"
	resultFailed   = "failed"
)

// Metrics count a Recorder's refusals and status writes. Labels are
// bounded: no Lock, object or user names.
type Metrics struct {
	recordedTotal prometheus.Counter
	writesTotal   *prometheus.CounterVec
}

// NewMetrics returns unregistered Recorder metrics.
func NewMetrics() *Metrics {
	return &Metrics{
		recordedTotal: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockguard_denials_recorded_total",
			Help: "Refusals recorded for status.lastDenied, one per refusing Lock or ClusterLock (dry-run requests are not recorded).",
		}),
		writesTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_denial_status_writes_total",
			Help: "Attempts to write a Lock's or ClusterLock's status.lastDenied, by result: written; conflict (the Lock changed since it was read: read again and retried); gone (the Lock was deleted or recreated: its pending refusals dropped); failed (given up until the next flush, the refusals kept).",
		}, []string{"result"}),
	}
}

// Register registers the metrics with reg.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.recordedTotal, m.writesTotal} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *Metrics) recorded(n int) {
	if m != nil {
		m.recordedTotal.Add(float64(n))
	}
}

func (m *Metrics) write(result string) {
	if m != nil {
		m.writesTotal.WithLabelValues(result).Inc()
	}
}
