package webhook

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/navique/lockguard/internal/transport"
)

// Reasons counted by lockguard_webhook_requests_refused_total: those of
// the webhook server's transport.Gate.
const (
	RefusedInFlight          = transport.RefusedInFlight
	RefusedInFlightPerSource = transport.RefusedInFlightPerSource
	RefusedBufferedBytes     = transport.RefusedBufferedBytes
	RefusedReadTimeout       = transport.RefusedReadTimeout
	RefusedCutOff            = transport.RefusedCutOff
	RefusedMemory            = transport.RefusedMemory
)

// Metrics are the handler's Prometheus metrics. A denial is an HTTP 200 to
// controller-runtime's own webhook metrics, so the handler counts its
// decisions itself. Labels are bounded: no object, Lock or user names.
type Metrics struct {
	deniedTotal   *prometheus.CounterVec
	updateDenied  *prometheus.CounterVec
	wouldDenied   *prometheus.CounterVec
	reviewsTotal  *prometheus.CounterVec
	duration      prometheus.Histogram
	refused       *prometheus.CounterVec
	connsClosed   *prometheus.CounterVec
	eventsDropped prometheus.Counter
	incomplete    *prometheus.CounterVec
	exceptionUses *prometheus.CounterVec
	skippedReads  prometheus.Counter
	// reviews are reviewsTotal's counters of every guard and decision,
	// looked up once (observe).
	reviews map[[2]string]prometheus.Counter
}

// guardNames are the guards the metrics count, each decision of each
// shown at zero.
var guardNames = []string{GuardObject, GuardCascade, GuardNamespace, GuardCRD, GuardReadOnly, GuardClusterLock, GuardCreate, GuardClusterCreate}

// decisionNames are the decisions of a review, as the metrics and audit
// annotations name them (decisionOf).
var decisionNames = []string{DecisionAllowed, DecisionDenied, DecisionErrored}

// NewMetrics returns unregistered handler metrics.
func NewMetrics() *Metrics {
	m := newMetrics()
	m.reviews = map[[2]string]prometheus.Counter{}
	for _, g := range guardNames {
		for _, d := range decisionNames {
			m.reviews[[2]string{g, d}] = m.reviewsTotal.WithLabelValues(g, d)
		}
	}
	return m
}

// newMetrics returns the metrics of NewMetrics.
func newMetrics() *Metrics {
	return &Metrics{
		deniedTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_delete_denied_total",
			Help: "DELETEs denied because live Locks protect the object, by guard (object: a locked object; cascade: an owner whose cascade would delete one; namespace: a namespace holding one; crd: the CustomResourceDefinition of one; clusterlock: a cluster-scoped object a ClusterLock names), namespace, group and kind of the object deleted; dry_run=\"true\" for server-side dry-run deletes (would have deleted) and \"false\" for real ones (tried to delete).",
		}, []string{"guard", "namespace", "group", "kind", "dry_run"}),
		updateDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_update_denied_total",
			Help: "UPDATEs (and PATCHes) denied because live ReadOnly Locks cover the object, by namespace, group and kind of the object; dry_run=\"true\" for server-side dry-run updates.",
		}, []string{"namespace", "group", "kind", "dry_run"}),
		wouldDenied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_would_deny_total",
			Help: "Requests allowed although Locks in Audit enforcement would have refused them (no enforcing Lock did), by guard (object: a DELETE; cascade: an owner's DELETE whose cascade would delete an object they cover; namespace: a namespace holding one; crd: the CustomResourceDefinition of its kind, or of Locks; readonly: an UPDATE), namespace, group and kind of the object; dry_run=\"true\" for server-side dry-run requests.",
		}, []string{"guard", "namespace", "group", "kind", "dry_run"}),
		reviewsTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_admission_reviews_total",
			Help: "Admission reviews answered by lockguard, by guard (object, cascade, namespace, crd; readonly: the UPDATEs of objects ReadOnly Locks may cover; clusterlock: the DELETEs and label changes of cluster-locked objects; create and clustercreate: Lock and ClusterLock CREATEs, denied when refused (expired, too many objects to label, a label RBAC refuses), errored when lockguard could not do its part, retryable) and decision: allowed, denied (protected by a Lock), or errored (Locks could not be verified; with failurePolicy Fail the API server refuses the request).",
		}, []string{"guard", "decision"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lockguard_admission_duration_seconds",
			Help:    "Time the admission handler takes to decide, excluding HTTP and JSON decoding of the review.",
			Buckets: []float64{10e-6, 25e-6, 50e-6, 100e-6, 250e-6, 500e-6, 1e-3, 2.5e-3, 5e-3, 10e-3, 25e-3, 100e-3, 1},
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_webhook_requests_refused_total",
			Help: "Requests to the webhook refused before a decision, by reason: in_flight (over --webhook-max-in-flight, HTTP 429), in_flight_per_source (over --webhook-max-in-flight-per-source from one address, HTTP 429), buffered_bytes (body buffers of the reviews in flight over --webhook-max-buffered-bytes, HTTP 429), read_timeout (body not received before the review's timeout, HTTP 408), cut_off (body still arriving, cut off for a request from an address holding fewer requests or bytes, HTTP 429). With failurePolicy Fail the API server refuses the delete.",
		}, []string{"reason"}),
		connsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_webhook_connections_closed_total",
			Help: "Connections to the webhook server closed by its connection limits, by reason: per_source (its address held --webhook-max-connections-per-source), full (--webhook-max-connections were open and its address held about as many as any other), evicted (an open one, closed for a new connection from an address holding fewer).",
		}, []string{"reason"}),
		incomplete: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_cascade_incomplete_total",
			Help: "Cascades the cascade guard could not walk to the end, by reason: depth (owner chains too long), objects (too many dependents), unsynced (the owner index's caches have not synced and the handler reads no API server instead: in lockguard, never), deadline (the review's). Such a delete is allowed with a warning unless a locked dependent was found; the garbage collector's delete of a locked dependent is still denied.",
		}, []string{"reason"}),
		exceptionUses: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lockguard_exception_uses_total",
			Help: "Requests that enforcing Locks would have refused and a LockException let through (docs/contract.md rule 20), by operation (DELETE, UPDATE); dry runs included.",
		}, []string{"operation"}),
		skippedReads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockguard_exception_reads_skipped_total",
			Help: "Refusals by enforcing Locks for which the replica's cache held no LockException that lets the request through, and the replica did not read the namespace's exceptions from the API server because its budget of such reads was spent (docs/contract.md rule 20): the refusal stood, though an exception the cache had not seen yet might have let it through.",
		}),
		eventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lockguard_events_dropped_total",
			Help: "DeleteBlocked Events not recorded because their object (the target, or a Lock) or all Events together were over the Event rate limits.",
		}),
	}
}

// Register registers the metrics with r: controller-runtime's registry in
// lockguard, a fresh registry in tests.
func (m *Metrics) Register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.deniedTotal, m.updateDenied, m.wouldDenied, m.reviewsTotal, m.duration, m.refused, m.connsClosed, m.eventsDropped, m.incomplete, m.exceptionUses, m.skippedReads} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	// Make the decisions visible at zero, so that rate() and alerts on
	// "errored" work before the first error.
	for _, g := range guardNames {
		for _, d := range decisionNames {
			m.reviewsTotal.WithLabelValues(g, d)
		}
	}
	for _, r := range []string{RefusedInFlight, RefusedInFlightPerSource, RefusedBufferedBytes, RefusedReadTimeout, RefusedCutOff, RefusedMemory} {
		m.refused.WithLabelValues(r)
	}
	for _, r := range []string{transport.ClosedPerSource, transport.ClosedFull, transport.ClosedMemory, transport.ClosedEvicted} {
		m.connsClosed.WithLabelValues(r)
	}
	for _, op := range []string{"DELETE", "UPDATE"} {
		m.exceptionUses.WithLabelValues(op)
	}
	for _, r := range []string{IncompleteDepth, IncompleteObjects, IncompleteUnsynced, IncompleteDeadline} {
		m.incomplete.WithLabelValues(r)
	}
	return nil
}

// dropEvent counts an Event over the limits. It is safe on a nil *Metrics.
func (m *Metrics) dropEvent() {
	if m != nil {
		m.eventsDropped.Inc()
	}
}

// Refused counts a request refused before a decision. It is safe on a nil
// *Metrics.
func (m *Metrics) Refused(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// ConnectionClosed counts a connection the webhook server's connection
// limits closed (transport.ServerOptions.Closed). It is safe on a nil
// *Metrics.
func (m *Metrics) ConnectionClosed(reason string) {
	if m != nil {
		m.connsClosed.WithLabelValues(reason).Inc()
	}
}

// reviewed counts one answer of guard in lockguard_admission_reviews_total
// alone (a create's admission: its time is its writes', not a decision's,
// and its refusals are no denied DELETE). It is safe on a nil *Metrics.
func (m *Metrics) reviewed(guard string, resp admission.Response) {
	if m == nil {
		return
	}
	m.count(guard, decisionOf(resp))
}

// count counts one review of guard that ended in decision d.
func (m *Metrics) count(guard, d string) {
	if c, ok := m.reviews[[2]string{guard, d}]; ok {
		c.Inc()
		return
	}
	m.reviewsTotal.WithLabelValues(guard, d).Inc()
}

// observe records one decision of guard. It is safe on a nil *Metrics.
func (m *Metrics) observe(req Request, guard string, resp admission.Response, took time.Duration) {
	if m == nil {
		return
	}
	m.duration.Observe(took.Seconds())
	d := decisionOf(resp)
	m.count(guard, d)
	switch {
	case d != DecisionDenied:
	case guard == GuardReadOnly:
		m.updateDenied.WithLabelValues(req.Namespace, req.Kind.Group, req.Kind.Kind, strconv.FormatBool(req.DryRun)).Inc()
	default:
		m.deniedTotal.WithLabelValues(guard, req.Namespace, req.Kind.Group, req.Kind.Kind, strconv.FormatBool(req.DryRun)).Inc()
	}
}

// cascadeIncomplete counts a cascade walk that stopped early for reason
// (none for ""). It is safe on a nil *Metrics.
func (m *Metrics) cascadeIncomplete(reason string) {
	if m != nil && reason != "" {
		m.incomplete.WithLabelValues(reason).Inc()
	}
}

// wouldDeny counts a request of guard allowed although audit Locks would
// have refused it. It is safe on a nil *Metrics.
func (m *Metrics) wouldDeny(req Request, guard string) {
	if m != nil {
		m.wouldDenied.WithLabelValues(guard, req.Namespace, req.Kind.Group, req.Kind.Kind, strconv.FormatBool(req.DryRun)).Inc()
	}
}

// exceptionUse counts a request of operation op that a LockException let
// through. It is safe on a nil *Metrics.
func (m *Metrics) exceptionUse(op string) {
	if m != nil {
		m.exceptionUses.WithLabelValues(op).Inc()
	}
}

// exceptionReadSkipped counts a read of exceptions from the API server
// not made for want of budget. It is safe on a nil *Metrics.
func (m *Metrics) exceptionReadSkipped() {
	if m != nil {
		m.skippedReads.Inc()
	}
}
