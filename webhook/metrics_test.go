package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestMetrics counts one decision of each kind and a dry-run denial, in a
// fresh registry.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics()
	if err := m.Register(reg); err != nil {
		t.Fatal(err)
	}
	index := ByTarget(func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		switch key.Name {
		case "locked":
			return []lockv1alpha1.Lock{lock("l", "")}, nil
		case "broken":
			return nil, context.DeadlineExceeded
		}
		return nil, nil
	})
	h := NewHandler(Config{Locks: index, Metrics: m})
	dry := request(admissionv1.Delete, "core.navique.com", "Stack", "ns", "locked", "")
	dry.DryRun = true
	for _, r := range []Request{
		request(admissionv1.Delete, "core.navique.com", "Stack", "ns", "locked", ""),
		dry,
		request(admissionv1.Delete, "core.navique.com", "Stack", "ns", "free", ""),
		request(admissionv1.Delete, "core.navique.com", "Stack", "ns", "broken", ""),
	} {
		h.Decide(context.Background(), r)
	}
	// Lock creates: one allowed, one refused (already expired).
	creates := NewCreateHandler(CreateOptions{Metrics: m})
	fresh := lock("fresh", "")
	expired := lock("expired", "")
	expired.Spec.ExpiresAt = &metav1.Time{Time: time.Now().Add(-time.Hour)}
	for _, l := range []lockv1alpha1.Lock{fresh, expired} {
		creates.Handle(context.Background(), lockCreate(t, "ns", &l, false))
	}

	want := `
# HELP lockguard_admission_reviews_total Admission reviews answered by lockguard, by guard (object, cascade, namespace, crd; readonly: the UPDATEs of objects ReadOnly Locks may cover; clusterlock: the DELETEs and label changes of cluster-locked objects; create and clustercreate: Lock and ClusterLock CREATEs, denied when refused (expired, too many objects to label, a label RBAC refuses), errored when lockguard could not do its part, retryable) and decision: allowed, denied (protected by a Lock), or errored (Locks could not be verified; with failurePolicy Fail the API server refuses the request).
# TYPE lockguard_admission_reviews_total counter
lockguard_admission_reviews_total{decision="allowed",guard="cascade"} 0
lockguard_admission_reviews_total{decision="allowed",guard="clustercreate"} 0
lockguard_admission_reviews_total{decision="allowed",guard="clusterlock"} 0
lockguard_admission_reviews_total{decision="allowed",guard="crd"} 0
lockguard_admission_reviews_total{decision="allowed",guard="create"} 1
lockguard_admission_reviews_total{decision="allowed",guard="namespace"} 0
lockguard_admission_reviews_total{decision="allowed",guard="object"} 1
lockguard_admission_reviews_total{decision="allowed",guard="readonly"} 0
lockguard_admission_reviews_total{decision="denied",guard="cascade"} 0
lockguard_admission_reviews_total{decision="denied",guard="clustercreate"} 0
lockguard_admission_reviews_total{decision="denied",guard="clusterlock"} 0
lockguard_admission_reviews_total{decision="denied",guard="crd"} 0
lockguard_admission_reviews_total{decision="denied",guard="create"} 1
lockguard_admission_reviews_total{decision="denied",guard="namespace"} 0
lockguard_admission_reviews_total{decision="denied",guard="object"} 2
lockguard_admission_reviews_total{decision="denied",guard="readonly"} 0
lockguard_admission_reviews_total{decision="errored",guard="cascade"} 0
lockguard_admission_reviews_total{decision="errored",guard="clustercreate"} 0
lockguard_admission_reviews_total{decision="errored",guard="clusterlock"} 0
lockguard_admission_reviews_total{decision="errored",guard="crd"} 0
lockguard_admission_reviews_total{decision="errored",guard="create"} 0
lockguard_admission_reviews_total{decision="errored",guard="namespace"} 0
lockguard_admission_reviews_total{decision="errored",guard="object"} 1
lockguard_admission_reviews_total{decision="errored",guard="readonly"} 0
# HELP lockguard_delete_denied_total DELETEs denied because live Locks protect the object, by guard (object: a locked object; cascade: an owner whose cascade would delete one; namespace: a namespace holding one; crd: the CustomResourceDefinition of one; clusterlock: a cluster-scoped object a ClusterLock names), namespace, group and kind of the object deleted; dry_run="true" for server-side dry-run deletes (would have deleted) and "false" for real ones (tried to delete).
# TYPE lockguard_delete_denied_total counter
lockguard_delete_denied_total{dry_run="false",group="core.navique.com",guard="object",kind="Stack",namespace="ns"} 1
lockguard_delete_denied_total{dry_run="true",group="core.navique.com",guard="object",kind="Stack",namespace="ns"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "lockguard_admission_reviews_total", "lockguard_delete_denied_total"); err != nil {
		t.Error(err)
	}
	if got := testutil.CollectAndCount(m.duration); got != 1 {
		t.Errorf("duration histogram: %d series, want 1", got)
	}
}
