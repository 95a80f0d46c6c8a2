package webhook

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// auditing is l in Audit enforcement.
func auditing(l lockv1alpha1.Lock) lockv1alpha1.Lock {
	l.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	return l
}

// TestAuditLocks: a Lock in Audit enforcement refuses nothing; a request
// only audit Locks would refuse is allowed with a warning that says the
// usual refusal, counted, and recorded for their lastWouldDeny unless a
// dry run (docs/contract.md rule 20). Enforcing Locks decide as before,
// naming only themselves.
func TestAuditLocks(t *testing.T) {
	const labelled = `{"tier":"db","core.navique.com/read-only":"true"}`
	watch, keep := auditing(lock("watch", "rollout")), lock("keep", "")
	frozenWatch := auditing(readOnlyLock("watch", "rollout"))
	del := request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", "forge")
	del.UserInfo.Username = "alice"
	dryDel := del
	dryDel.DryRun = true
	update := updateRequest("alice", nil, stackJSON(1, labelled), stackJSON(2, labelled))
	type want struct {
		Result   result
		Warnings []string
		Would    [][]string // the Locks handed to the WouldDeny recorder
		Denied   [][]string // the Locks handed to the Denials recorder
		Counted  float64    // lockguard_would_deny_total of the guard
	}
	cases := map[string]struct {
		reason string
		update bool // the UPDATE update, to the update guard
		req    Request
		locks  []lockv1alpha1.Lock
		want   want
	}{
		"DeleteAuditOnly": {
			reason: "The delete of an object only an audit Lock covers is allowed, with the denial it would get as a warning.",
			req:    del, locks: []lockv1alpha1.Lock{watch},
			want: want{Result: result{Allowed: true, Code: 200}, Warnings: []string{"lockguard: would deny: resource is protected by Lock(s) [watch]; delete the Lock(s) before deleting this resource (watch: rollout)"},
				Would: [][]string{{"watch"}}, Counted: 1},
		},
		"DeleteDryRun": {
			reason: "A dry run gets the same answer and is counted, but recorded nowhere.",
			req:    dryDel, locks: []lockv1alpha1.Lock{watch},
			want: want{Result: result{Allowed: true, Code: 200}, Warnings: []string{"lockguard: would deny: resource is protected by Lock(s) [watch]; delete the Lock(s) before deleting this resource (watch: rollout)"}},
		},
		"DeleteEnforcingToo": {
			reason: "An enforcing Lock denies as always, naming only itself: the audit Lock refuses nothing.",
			req:    del, locks: []lockv1alpha1.Lock{watch, keep},
			want: want{Result: result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: "resource is protected by Lock(s) [keep]; delete the Lock(s) before deleting this resource"},
				Denied: [][]string{{"keep"}}},
		},
		"UpdateAuditOnly": {
			reason: "The update an audit ReadOnly Lock would freeze is allowed, with the refusal as a warning.",
			update: true, locks: []lockv1alpha1.Lock{frozenWatch},
			want: want{Result: result{Allowed: true, Code: 200}, Warnings: []string{"lockguard: would deny: resource is read-only under Lock(s) [watch] (the update changes spec); delete the Lock(s) or set their level to CanNotDelete before changing this resource (watch: rollout)"},
				Would: [][]string{{"watch"}}, Counted: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			denied, would, m := &denialLog{}, &denialLog{}, NewMetrics()
			index := ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return tc.locks, nil })
			h := NewHandler(Config{Locks: index, Denials: denied, WouldDeny: would, Metrics: m})
			guard := GuardObject
			var resp admission.Response
			if tc.update {
				guard, resp = GuardReadOnly, NewUpdateHandler(h, Exemptions{}, nil).Handle(t.Context(), update)
			} else {
				resp = h.Decide(t.Context(), tc.req)
			}
			got := want{Result: resultOf(resp), Warnings: resp.Warnings, Would: would.locks, Denied: denied.locks,
				Counted: testutil.ToFloat64(m.wouldDenied.WithLabelValues(guard, "forge", "core.navique.com", "Stack", "false"))}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
			for _, d := range would.denials {
				if d.User != "alice" || d.Kind != "Stack" || d.Name != "forge" || d.Time.IsZero() {
					t.Errorf("%s\nrecorded %+v, want Stack forge by alice at a time", tc.reason, d)
				}
			}
		})
	}
}
