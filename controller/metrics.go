package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// Lock states reported by lockguard_locks.
const (
	StateActive           = "active"
	StateMissingReference = "missing_reference"
	StateInvalidTarget    = "invalid_target"
	// StateAudit is a live Lock in Audit enforcement (docs/contract.md
	// rule 20): it refuses nothing.
	StateAudit = "audit"
	// StatePending is a Lock whose status lockguard has not written yet.
	StatePending = "pending"
)

// LockStateCollector reports lockguard_locks{state}: the Locks in the cache
// by the state of their status. It counts at scrape time, from the cache,
// so every replica reports the same numbers, leader or not.
type LockStateCollector struct {
	locks *readmodel.LockIndex
	desc  *prometheus.Desc
}

// NewLockStateCollector returns a collector that counts the Locks of
// locks' informer.
func NewLockStateCollector(locks *readmodel.LockIndex) *LockStateCollector {
	return &LockStateCollector{
		locks: locks,
		desc:  prometheus.NewDesc("lockguard_locks", "Locks by state: active, audit (in Audit enforcement: refusing nothing), missing_reference, invalid_target, or pending (status not written yet).", []string{"state"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *LockStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. It reports nothing until the
// cache has synced.
func (c *LockStateCollector) Collect(ch chan<- prometheus.Metric) {
	if !c.locks.HasSynced() {
		return
	}
	counts := map[string]int{StateActive: 0, StateMissingReference: 0, StateInvalidTarget: 0, StateAudit: 0, StatePending: 0}
	c.locks.EachReadiness(func(active, ready bool, reason string) { counts[lockState(active, ready, reason)]++ })
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), state)
	}
}

// lockState is the state lockguard_locks counts a Lock in, by its
// status.active, whether it has a Ready condition, and that condition's
// reason.
func lockState(active, ready bool, reason string) string {
	switch {
	case active:
		return StateActive
	case !ready:
		return StatePending
	case reason == lockv1alpha1.ReasonMissingReference:
		return StateMissingReference
	case reason == lockv1alpha1.ReasonInvalidTarget:
		return StateInvalidTarget
	case reason == lockv1alpha1.ReasonAudit:
		return StateAudit
	default:
		return StatePending
	}
}
