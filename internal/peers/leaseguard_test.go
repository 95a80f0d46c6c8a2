package peers

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestLeaseGuardRefuses: whatever reaches the identity Leases' entry (only
// writes by principals without LeaseWriteVerb do) is refused, with the
// message that names the verb.
func TestLeaseGuardRefuses(t *testing.T) {
	for _, op := range []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
		res := NewLeaseGuard().Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Namespace: "lockguard-system"}})
		want := "only lockguard writes the identity Leases of its replicas (label lockguard.navique.com/peers): " +
			"the view of the replicas in the peer protocol assumes it; this needs the verb lockguard-peer on leases in lockguard-system"
		if res.Allowed || res.Result == nil {
			t.Fatalf("%s: allowed", op)
		}
		if diff := cmp.Diff(want, res.Result.Message); diff != "" {
			t.Errorf("%s: message: -want, +got:\n%s", op, diff)
		}
	}
}
