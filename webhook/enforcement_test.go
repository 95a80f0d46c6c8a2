package webhook

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// TestAuditGuards: the namespace, CRD and cascade guards treat Locks in
// Audit enforcement as the object guard does (docs/contract.md rule 20):
// a delete that only audit Locks would refuse is allowed with the refusal
// as a warning, counted under the guard, and handed to the WouldDeny
// recorder unless a dry run; enforcing Locks deny as always, naming only
// themselves, and the audit Locks are then neither named nor recorded. The
// CRD guard checks at most maxNamed namespaces' objects for audit Locks
// too, and counts the others.
func TestAuditGuards(t *testing.T) {
	objects := map[schema.GroupKind]map[string]map[string]bool{
		stackGK:  {"forge": {"forge": true, "root": true}},
		widgetGK: {"forge": {"w1": true}, "edge": {"w2": true}},
	}
	watch := auditing(guardLock("forge", "watch", "Stack", "forge", "rollout"))
	keep := guardLock("forge", "keep", "Stack", "forge", "")
	spread := &fakeAPI{objects: map[schema.GroupKind]map[string]map[string]bool{widgetGK: {}}}
	var spreadNames []string
	for i := range 12 {
		ns := fmt.Sprintf("t%02d", i)
		spread.objects[widgetGK][ns] = map[string]bool{"w": true}
		spread.locks = append(spread.locks, auditing(guardLock(ns, "watch", "Widget", "w", "")))
		if i < maxNamed {
			spreadNames = append(spreadNames, ns+"/watch")
		}
	}
	nsDelete := namespaceRequest("forge")
	crdDelete := crdRequest(lockv1alpha1.Group, "Widget")
	ownerDryRun := ownerDelete("")
	ownerDryRun.DryRun = true
	nsDryRun := nsDelete
	nsDryRun.DryRun = true
	// The cascade's dependents: db, which an audit Lock covers, and db2,
	// which an enforcing one does.
	dependents := []graphObject{obj("PostgresCluster", "db", "Stack/root"), obj("PostgresCluster", "db2", "Stack/root")}
	watchDB := auditing(*newLock("forge", "watch-db", "", "PostgresCluster", "db"))
	keepDB2 := *newLock("forge", "keep-db2", "", "PostgresCluster", "db2")
	watchRoot := auditing(*newLock("forge", "watch-root", "", "Stack", "root"))
	byName := func(locks ...lockv1alpha1.Lock) Locks {
		return ByTarget(func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
			var out []lockv1alpha1.Lock
			for _, l := range locks {
				if l.Spec.TargetRef.Name == key.Name && l.Spec.TargetRef.Kind == key.Kind {
					out = append(out, l)
				}
			}
			return out, nil
		})
	}
	type want struct {
		Result   result
		Warnings []string
		Would    [][]string // the Locks handed to the WouldDeny recorder
		Denied   [][]string // the Locks handed to the Denials recorder
		Counted  float64    // lockguard_would_deny_total of the guard and the request
	}
	allowed := result{Allowed: true, Code: 200}
	forbidden := func(msg string) result { return result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: msg} }
	cases := map[string]struct {
		reason  string
		api     *fakeAPI
		cache   []lockv1alpha1.Lock // the Lock cache's live Locks
		index   Locks               // the cache's lookups by target (the cascade's)
		objects []graphObject       // the owner graph
		req     Request
		guard   string
		want    want
	}{
		"NamespaceAuditOnly": {
			reason: "The namespace holding an audit Lock on an existing object is deleted, with the refusal as a warning, counted and recorded.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{watch}},
			cache:  []lockv1alpha1.Lock{watch},
			req:    nsDelete, guard: GuardNamespace,
			want: want{Result: allowed, Warnings: []string{WouldDenyWarning(NamespaceDenialMessage("forge", []lockv1alpha1.Lock{watch}))},
				Would: [][]string{{"watch"}}, Counted: 1},
		},
		"NamespaceDryRun": {
			reason: "A dry run gets the same answer and is counted, but recorded nowhere.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{watch}},
			req:    nsDryRun, guard: GuardNamespace,
			want: want{Result: allowed, Warnings: []string{WouldDenyWarning(NamespaceDenialMessage("forge", []lockv1alpha1.Lock{watch}))}, Counted: 1},
		},
		"NamespaceEnforcingToo": {
			reason: "An enforcing Lock the cache has not seen denies, naming only itself; the audit Lock is neither named nor recorded.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{watch, keep}},
			cache:  []lockv1alpha1.Lock{watch},
			req:    nsDelete, guard: GuardNamespace,
			want: want{Result: forbidden(NamespaceDenialMessage("forge", []lockv1alpha1.Lock{keep})), Denied: [][]string{{"keep"}}},
		},
		"NamespaceAuditMissing": {
			reason: "An audit Lock whose target does not exist would refuse nothing: no warning.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{auditing(guardLock("forge", "watch", "Stack", "absent", ""))}},
			req:    nsDelete, guard: GuardNamespace,
			want: want{Result: allowed},
		},
		"CRDAuditSpread": {
			reason: "The CRD of a kind that audit Locks in 12 namespaces would protect: allowed with the refusal naming the first ten and counting the others, whose targets are not read; the ten are recorded.",
			api:    spread,
			req:    crdDelete, guard: GuardCRD,
			want: want{Result: allowed,
				Warnings: []string{WouldDenyWarning("customresourcedefinition is protected by Lock(s) [" + strings.Join(spreadNames, " ") + " and 2 more]; delete the Lock(s) before deleting this CustomResourceDefinition " + describeLocks(spread.locks[:maxNamed], true) + "; list them all with: kubectl get locks -A")},
				Would:    [][]string{slices.Repeat([]string{"watch"}, maxNamed)}, Counted: 1},
		},
		"CRDEnforcingToo": {
			reason: "An enforcing Lock on a Widget denies the CRD's delete, naming only itself.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{auditing(guardLock("edge", "watch", "Widget", "w2", "")), guardLock("forge", "keep", "Widget", "w1", "")}},
			req:    crdDelete, guard: GuardCRD,
			want: want{Result: forbidden(CRDDenialMessage([]lockv1alpha1.Lock{guardLock("forge", "keep", "Widget", "w1", "")})), Denied: [][]string{{"keep"}}},
		},
		"LockCRDAuditOnly": {
			reason: "The Lock CRD, when every live Lock is in Audit enforcement: allowed, with the refusal as a warning, recorded.",
			api:    &fakeAPI{locks: []lockv1alpha1.Lock{watch}},
			req:    crdRequest(lockv1alpha1.Group, "Lock"), guard: GuardCRD,
			want: want{Result: allowed, Warnings: []string{WouldDenyWarning(CRDDenialMessage([]lockv1alpha1.Lock{watch}) + "; deleting the Lock CustomResourceDefinition would delete every Lock")},
				Would: [][]string{{"watch"}}, Counted: 1},
		},
		"CascadeAuditOnly": {
			reason:  "An owner whose cascade reaches a dependent only an audit Lock covers is deleted, with the cascade's refusal as a warning, counted and recorded.",
			index:   byName(watchDB),
			objects: dependents, req: ownerDelete(""), guard: GuardCascade,
			want: want{Result: allowed, Warnings: []string{WouldDenyWarning(CascadeDenialMessage([]lockv1alpha1.Lock{watchDB}, []string{"PostgresCluster/db"}))},
				Would: [][]string{{"watch-db"}}, Counted: 1},
		},
		"CascadeDryRun": {
			reason:  "A dry run gets the same answer and is counted, but recorded nowhere.",
			index:   byName(watchDB),
			objects: dependents, req: ownerDryRun, guard: GuardCascade,
			want: want{Result: allowed, Warnings: []string{WouldDenyWarning(CascadeDenialMessage([]lockv1alpha1.Lock{watchDB}, []string{"PostgresCluster/db"}))}, Counted: 1},
		},
		"CascadeEnforcingToo": {
			reason:  "An enforcing Lock on another dependent denies, naming only itself and its dependent.",
			index:   byName(watchDB, keepDB2),
			objects: dependents, req: ownerDelete(""), guard: GuardCascade,
			want: want{Result: forbidden(CascadeDenialMessage([]lockv1alpha1.Lock{keepDB2}, []string{"PostgresCluster/db2"})), Denied: [][]string{{"keep-db2"}}},
		},
		"CascadeOrphanAuditOnly": {
			reason:  "An Orphan delete deletes no dependent: an audit Lock on one would refuse nothing.",
			index:   byName(watchDB),
			objects: dependents, req: ownerDelete(metav1.DeletePropagationOrphan), guard: GuardCascade,
			want: want{Result: allowed},
		},
		"ObjectAndCascadeAudit": {
			reason:  "When audit Locks cover the owner and a dependent, the object guard's refusal is the one said: the owner's Lock would have refused first.",
			index:   byName(watchRoot, watchDB),
			objects: dependents, req: ownerDelete(""), guard: GuardObject,
			want: want{Result: allowed, Warnings: []string{WouldDenyWarning(DenialMessage([]lockv1alpha1.Lock{watchRoot}))},
				Would: [][]string{{"watch-root"}}, Counted: 1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := tc.req
			req.UserInfo.Username = "alice"
			index := tc.index
			if index == nil {
				index = noLookup(t)
			}
			api := tc.api
			if api == nil {
				api = &fakeAPI{objects: objects}
			}
			denied, would, m := &denialLog{}, &denialLog{}, NewMetrics()
			h := NewHandler(Config{Locks: withCache{&countingCache{locks: tc.cache}, index}, Denials: denied, WouldDeny: would, Metrics: m,
				Cluster: &ClusterConfig{API: api, Kinds: guardMapper()}, Cascade: CascadeConfig{Graph: &fakeGraph{objects: tc.objects}}})
			resp := h.Decide(t.Context(), req)
			got := want{Result: resultOf(resp), Warnings: resp.Warnings, Would: would.locks, Denied: denied.locks,
				Counted: testutil.ToFloat64(m.wouldDenied.WithLabelValues(tc.guard, req.Namespace, req.Kind.Group, req.Kind.Kind, strconv.FormatBool(req.DryRun)))}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
			for _, d := range would.denials {
				if d.User != "alice" || d.Kind != req.Kind.Kind || d.Name != req.Target().Name || d.Operation != "DELETE" || d.Time.IsZero() {
					t.Errorf("%s\nrecorded %+v, want the DELETE of %s %s by alice at a time", tc.reason, d, req.Kind.Kind, req.Target().Name)
				}
			}
			if len(api.lists) > maxNamed {
				t.Errorf("%s\nDecide(...) listed the targets of %d namespaces, want at most %d", tc.reason, len(api.lists), maxNamed)
			}
		})
	}
}
