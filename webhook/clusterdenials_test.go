package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// eventLog is an EventRecorder that keeps each Event as
// "Kind namespace/name uid: reason: note" (Kind from the regarding
// object's TypeMeta, or its Go type for a ClusterLock from a cache).
type eventLog struct {
	mu     sync.Mutex
	events []string
}

func (l *eventLog) Eventf(regarding, _ runtime.Object, _, reason, _, note string, args ...any) {
	kind := regarding.GetObjectKind().GroupVersionKind().Kind
	if _, ok := regarding.(*lockv1alpha1.ClusterLock); ok {
		kind = "ClusterLock"
	}
	m, _ := meta.Accessor(regarding)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s/%s %s: %s: %s", kind, m.GetNamespace(), m.GetName(), m.GetUID(), reason, fmt.Sprintf(note, args...)))
}

// TestClusterLockRefusalsRecorded (docs/contract.md rules 14 and 22): a
// ClusterLock's refusal, by its delete, label and update guards, is
// handed to the DenialRecorder (for the refusing ClusterLocks'
// status.lastDenied) and recorded as Warning Events on the object
// (cluster-scoped, though a Namespace's review names it as its namespace)
// and on each refusing ClusterLock, as a Lock's is: DeleteBlocked, or
// UpdateBlocked; a request only audit ClusterLocks would refuse is
// allowed with one warning and handed to the would-deny recorder; a dry
// run and an allowed request are recorded nowhere.
func TestClusterLockRefusalsRecorded(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	keep := clusterLock("keep-prod", "v1", "Namespace", "prod")
	audit := clusterLock("watch-prod", "v1", "Namespace", "prod")
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	frozen := clusterLock("freeze-prod", "v1", "Namespace", "prod")
	frozen.Spec.Level = lockv1alpha1.LevelReadOnly
	locked := map[string]string{lockv1alpha1.ClusterLockedLabel: "true", lockv1alpha1.ReadOnlyLabel: "true"}
	nsObject := func(labels map[string]string) runtime.RawExtension {
		raw, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "prod", "uid": "uid-prod", "labels": labels}})
		return runtime.RawExtension{Raw: raw}
	}
	del := func(dryRun bool) func(h *ClusterLockHandler) admission.Response {
		return func(h *ClusterLockHandler) admission.Response {
			req := request(admissionv1.Delete, "", "Namespace", "prod", "prod", "prod")
			req.UserInfo.Username, req.DryRun, req.OldObject.Metadata.UID = "alice", dryRun, "uid-prod"
			return h.DecideDelete(context.Background(), req)
		}
	}
	update := func(next map[string]string, dryRun bool) func(h *ClusterLockHandler) admission.Request {
		return func(*ClusterLockHandler) admission.Request {
			return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Name: "prod", Namespace: "prod",
				Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, UserInfo: authenticationv1.UserInfo{Username: "alice"},
				OldObject: nsObject(locked), Object: nsObject(next), DryRun: &dryRun}}
		}
	}
	label := func(dryRun bool) func(h *ClusterLockHandler) admission.Response {
		return func(h *ClusterLockHandler) admission.Response {
			return h.DecideLabel(context.Background(), update(map[string]string{lockv1alpha1.ReadOnlyLabel: "true"}, dryRun)(h))
		}
	}
	change := func(dryRun bool) func(h *ClusterLockHandler) admission.Response {
		return func(h *ClusterLockHandler) admission.Response {
			return h.DecideUpdate(context.Background(), update(map[string]string{lockv1alpha1.ClusterLockedLabel: "true", lockv1alpha1.ReadOnlyLabel: "true", "team": "x"}, dryRun)(h))
		}
	}
	deleted := lockv1alpha1.DeniedRequest{User: "alice", Operation: "DELETE", Kind: "Namespace", Name: "prod"}
	updated := lockv1alpha1.DeniedRequest{User: "alice", Operation: "UPDATE", Kind: "Namespace", Name: "prod"}
	cases := map[string]struct {
		locks    []lockv1alpha1.ClusterLock
		decide   func(h *ClusterLockHandler) admission.Response
		allowed  bool
		warnings int
		denied   [][]string
		would    [][]string
		recorded []lockv1alpha1.DeniedRequest // by the one recorder handed any
		events   []string
	}{
		"delete refused": {locks: []lockv1alpha1.ClusterLock{keep, audit}, decide: del(false),
			denied: [][]string{{"ClusterLock/keep-prod"}}, recorded: []lockv1alpha1.DeniedRequest{deleted},
			events: []string{
				"Namespace /prod uid-prod: DeleteBlocked: DELETE by alice denied: protected by ClusterLock(s) keep-prod",
				`ClusterLock /keep-prod : DeleteBlocked: Denied the DELETE of Namespace "prod" by alice`,
			}},
		"delete refused, dry run": {locks: []lockv1alpha1.ClusterLock{keep}, decide: del(true)},
		"delete: audit would deny": {locks: []lockv1alpha1.ClusterLock{audit}, decide: del(false), allowed: true, warnings: 1,
			would: [][]string{{"ClusterLock/watch-prod"}}, recorded: []lockv1alpha1.DeniedRequest{deleted}},
		"delete: audit would deny, dry run": {locks: []lockv1alpha1.ClusterLock{audit}, decide: del(true), allowed: true, warnings: 1},
		"delete allowed":                    {decide: del(false), allowed: true},
		"label removal refused": {locks: []lockv1alpha1.ClusterLock{keep}, decide: label(false),
			denied: [][]string{{"ClusterLock/keep-prod"}}, recorded: []lockv1alpha1.DeniedRequest{updated},
			events: []string{
				"Namespace /prod uid-prod: UpdateBlocked: UPDATE by alice denied: protected by ClusterLock(s) keep-prod",
				`ClusterLock /keep-prod : UpdateBlocked: Denied the UPDATE of Namespace "prod" by alice`,
			}},
		"label removal refused, dry run": {locks: []lockv1alpha1.ClusterLock{keep}, decide: label(true)},
		"read-only update refused": {locks: []lockv1alpha1.ClusterLock{frozen, keep}, decide: change(false),
			denied: [][]string{{"ClusterLock/freeze-prod"}}, recorded: []lockv1alpha1.DeniedRequest{updated},
			events: []string{
				"Namespace /prod uid-prod: UpdateBlocked: UPDATE by alice denied: read-only under ClusterLock(s) freeze-prod",
				`ClusterLock /freeze-prod : UpdateBlocked: Denied the UPDATE of Namespace "prod" by alice`,
			}},
		"read-only update refused, dry run": {locks: []lockv1alpha1.ClusterLock{frozen}, decide: change(true)},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			denied, would, events := &denialLog{}, &denialLog{}, &eventLog{}
			cache := &clusterLocksOf{items: c.locks}
			h := NewClusterLockHandler(NewHandler(Config{Metrics: NewMetrics(), Events: events, Denials: denied, WouldDeny: would}),
				ClusterLockConfig{Cache: cache, API: cache, Now: func() time.Time { return now }, Exempt: &Exemptions{}})
			resp := c.decide(h)
			if resp.Allowed != c.allowed || len(resp.Warnings) != c.warnings {
				t.Fatalf("allowed %v with warnings %q; want allowed %v, %d warnings: %+v", resp.Allowed, resp.Warnings, c.allowed, c.warnings, resp.Result)
			}
			if diff := cmp.Diff(c.denied, denied.locks); diff != "" {
				t.Errorf("handed to the lastDenied recorder: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(c.would, would.locks); diff != "" {
				t.Errorf("handed to the lastWouldDeny recorder: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(c.recorded, append(denied.denials, would.denials...), cmpopts.IgnoreFields(lockv1alpha1.DeniedRequest{}, "Time"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("recorded requests: -want, +got:\n%s", diff)
			}
			if diff := cmp.Diff(c.events, events.events, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Events: -want, +got:\n%s", diff)
			}
		})
	}
}

// TestClusterLockEventsNameAtMostMaxNamed: the Events of a refusal by
// more than maxNamed ClusterLocks (a selector ClusterLock for each
// team) name the first maxNamed, by name, and go to those alone; every
// refusing ClusterLock's lastDenied is recorded.
func TestClusterLockEventsNameAtMostMaxNamed(t *testing.T) {
	var locks []lockv1alpha1.ClusterLock
	var names []string
	for i := range maxNamed + 2 {
		c := clusterLock(fmt.Sprintf("keep-%02d", maxNamed+1-i), "v1", "Namespace", "prod")
		locks = append(locks, c)
	}
	for i := range maxNamed + 2 {
		names = append(names, fmt.Sprintf("ClusterLock/keep-%02d", i))
	}
	denied, events := &denialLog{}, &eventLog{}
	cache := &clusterLocksOf{items: locks}
	h := NewClusterLockHandler(NewHandler(Config{Events: events, Denials: denied}), ClusterLockConfig{Cache: cache, API: cache})
	req := request(admissionv1.Delete, "", "Namespace", "prod", "prod", "prod")
	if resp := h.DecideDelete(context.Background(), req); resp.Allowed {
		t.Fatal("allowed, want refused")
	}
	if diff := cmp.Diff([][]string{names}, denied.locks); diff != "" {
		t.Errorf("handed to the lastDenied recorder: -want, +got:\n%s", diff)
	}
	if got, want := len(events.events), 1+maxNamed; got != want {
		t.Fatalf("%d Events, want %d: %q", got, want, events.events)
	}
	if want := "keep-00, keep-01, keep-02, keep-03, keep-04, keep-05, keep-06, keep-07, keep-08, keep-09"; !cmp.Equal(events.events[0][len(events.events[0])-len(want):], want) {
		t.Errorf("the object's Event %q, want it to name %q", events.events[0], want)
	}
}
