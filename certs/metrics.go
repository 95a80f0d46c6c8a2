package certs

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// ExpiryCollector reports lockguard_serving_certificate_expiry_timestamp_seconds:
// the NotAfter of the certificate the webhook server currently serves (after
// any reload), as a Unix timestamp.
type ExpiryCollector struct {
	watcher *certwatcher.CertWatcher
	desc    *prometheus.Desc
}

// NewExpiryCollector returns a collector for the watcher's certificate.
func NewExpiryCollector(w *certwatcher.CertWatcher) *ExpiryCollector {
	return &ExpiryCollector{
		watcher: w,
		desc: prometheus.NewDesc("lockguard_serving_certificate_expiry_timestamp_seconds",
			"Expiry (NotAfter, Unix seconds) of the webhook serving certificate currently loaded.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *ExpiryCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *ExpiryCollector) Collect(ch chan<- prometheus.Metric) {
	cert, err := c.watcher.GetCertificate(nil)
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			ch <- prometheus.NewInvalidMetric(c.desc, err)
			return
		}
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(leaf.NotAfter.Unix()))
}
