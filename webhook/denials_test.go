package webhook

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// denialLog is a DenialRecorder that keeps what it is given: the names of
// the refusing Locks, or of the ClusterLocks as ClusterLock/NAME.
type denialLog struct {
	locks   [][]string
	denials []lockv1alpha1.DeniedRequest
}

func (l *denialLog) RecordClusterDenial(locks []lockv1alpha1.ClusterLock, d lockv1alpha1.DeniedRequest) {
	var names []string
	for _, c := range locks {
		names = append(names, "ClusterLock/"+c.Name)
	}
	l.locks, l.denials = append(l.locks, names), append(l.denials, d)
}

func (l *denialLog) RecordDenial(locks []lockv1alpha1.Lock, d lockv1alpha1.DeniedRequest) {
	var names []string
	for _, lk := range locks {
		names = append(names, lk.Name)
	}
	l.locks, l.denials = append(l.locks, names), append(l.denials, d)
}

// TestRefusalsAreRecorded: a refused request, and only a refused request
// that is not a dry run, is handed to the DenialRecorder once, with the
// Locks that refused it and who asked for what.
func TestRefusalsAreRecorded(t *testing.T) {
	refused := request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", "")
	refused.UserInfo.Username = "alice"
	dryRun := refused
	dryRun.DryRun = true
	other := request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "free", "")

	cases := map[string]struct {
		reason string
		req    Request
		locks  [][]string
		want   []lockv1alpha1.DeniedRequest
	}{
		"Refused": {
			reason: "The refusing Locks, the user, the operation and the object.",
			req:    refused,
			locks:  [][]string{{"a", "b"}},
			want:   []lockv1alpha1.DeniedRequest{{User: "alice", Operation: "DELETE", Kind: "Stack", Name: "forge"}},
		},
		"DryRun": {
			reason: "A dry run is decided alike and recorded nowhere.",
			req:    dryRun,
		},
		"Allowed": {
			reason: "An allowed request is not a refusal.",
			req:    other,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			log := &denialLog{}
			index := ByTarget(func(k lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
				if k.Name == "forge" {
					return []lockv1alpha1.Lock{lock("a", ""), lock("b", "")}, nil
				}
				return nil, nil
			})
			h := NewHandler(Config{Locks: index, Denials: log})
			h.Decide(t.Context(), tc.req)
			if diff := cmp.Diff(tc.locks, log.locks); diff != "" {
				t.Errorf("%s\nrecorded Locks: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want, log.denials, cmpopts.IgnoreFields(lockv1alpha1.DeniedRequest{}, "Time")); diff != "" {
				t.Errorf("%s\nrecorded denials: -want, +got:\n%s", tc.reason, diff)
			}
			for _, d := range log.denials {
				if d.Time.IsZero() {
					t.Errorf("%s\nrecorded without a time", tc.reason)
				}
			}
		})
	}
}

// TestRecordRefusalOfAnotherGuard: a guard other than the delete guards
// (the update guard of ReadOnly Locks) records its refusals through the
// same hook, with its own operation; its dry runs are recorded nowhere.
func TestRecordRefusalOfAnotherGuard(t *testing.T) {
	log := &denialLog{}
	h := NewHandler(Config{Locks: ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil }), Denials: log})
	frozen := []lockv1alpha1.Lock{lock("freeze", "")}
	update := Request{UserInfo: UserInfo{Username: "bob"}, Operation: admissionv1.Update, Kind: metav1.GroupVersionKind{Kind: "Stack"}, Name: "web", DryRun: true}
	refused := decision{guard: GuardReadOnly, resp: admission.Denied("read-only"), locks: frozen}
	h.finish.finish(update, refused, time.Now())
	update.DryRun = false
	h.finish.finish(update, refused, time.Now())
	want := []lockv1alpha1.DeniedRequest{{User: "bob", Operation: "UPDATE", Kind: "Stack", Name: "web"}}
	if diff := cmp.Diff(want, log.denials, cmpopts.IgnoreFields(lockv1alpha1.DeniedRequest{}, "Time")); diff != "" {
		t.Errorf("recorded: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"freeze"}}, log.locks); diff != "" {
		t.Errorf("recorded Locks: -want, +got:\n%s", diff)
	}
}
