package webhook

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// graphObject is an object of fakeGraph.
type graphObject struct {
	gk   schema.GroupKind
	meta *metav1.PartialObjectMetadata
}

// fakeGraph is an OwnerGraph of the objects of namespace "forge"; it
// holds the kinds of core.navique.com (none other), and err makes
// Dependents fail (a cache that has not synced).
type fakeGraph struct {
	objects []graphObject
	err     error
}

func (g *fakeGraph) Dependents(ns string, owner types.UID, fn func(schema.GroupKind, metav1.Object) bool) error {
	if g.err != nil {
		return g.err
	}
	for _, o := range g.objects {
		for _, ref := range o.meta.OwnerReferences {
			if ref.UID == owner && o.meta.Namespace == ns {
				if !fn(o.gk, o.meta) {
					return nil
				}
				break
			}
		}
	}
	return nil
}

func (g *fakeGraph) Owner(ns string, ref metav1.OwnerReference) (metav1.Object, bool) {
	gv, _ := schema.ParseGroupVersion(ref.APIVersion)
	if gv.Group != lockv1alpha1.Group {
		return nil, false
	}
	for _, o := range g.objects {
		if o.gk.Kind == ref.Kind && o.meta.Namespace == ns && o.meta.Name == ref.Name {
			return o.meta, true
		}
	}
	return nil, true
}

// obj is an object of kind in namespace forge, with UID "uid-<name>",
// owned by owners (each "Kind/name", in the group, UID "uid-<name>").
func obj(kind, name string, owners ...string) graphObject {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name, UID: types.UID("uid-" + name)}}
	for _, ow := range owners {
		k, n, _ := strings.Cut(ow, "/")
		o.OwnerReferences = append(o.OwnerReferences, metav1.OwnerReference{APIVersion: "core.navique.com/v1alpha1", Kind: k, Name: n, UID: types.UID("uid-" + n)})
	}
	return graphObject{gk: schema.GroupKind{Group: lockv1alpha1.Group, Kind: kind}, meta: o}
}

// with applies f to o's metadata.
func with(o graphObject, f func(*metav1.PartialObjectMetadata)) graphObject {
	f(o.meta)
	return o
}

// ownerDelete is the DELETE of Stack root in forge, UID uid-root.
func ownerDelete(policy metav1.DeletionPropagation, finalizers ...string) Request {
	r := request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "root", "root")
	r.OldObject.Metadata.UID = "uid-root"
	r.OldObject.Metadata.Finalizers = finalizers
	if policy != "" {
		r.Options.PropagationPolicy = &policy
	}
	return r
}

// locksOn is a Locks holding one Lock, keep-<name>, per name given
// (Kinds: PostgresCluster for a name starting with "db", else Stack).
func locksOn(names ...string) Locks {
	return ByTarget(func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		for _, n := range names {
			if key.Name == n && key.Namespace == "forge" {
				return []lockv1alpha1.Lock{*newLock("forge", "keep-"+n, "", key.Kind, n)}, nil
			}
		}
		return nil, nil
	})
}

func TestCascadeGuard(t *testing.T) {
	chain := []graphObject{obj("Stack", "mid", "Stack/root"), obj("PostgresCluster", "db", "Stack/mid")}
	denied := func(locks []string, deps ...string) result {
		ls := make([]lockv1alpha1.Lock, 0, len(locks))
		for _, l := range locks {
			ls = append(ls, lock(l, ""))
		}
		return result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: CascadeDenialMessage(ls, deps)}
	}
	allowed := result{Allowed: true, Code: 200}
	cases := map[string]struct {
		reason     string
		req        Request
		objects    []graphObject
		graphErr   error
		index      Locks
		api        []lockv1alpha1.Lock // the API server's Locks (confirmation); nil: no confirmation
		fresh      *bool               // a Freshness answering this for every dependent; nil: none
		mode       CascadeMode
		limits     CascadeLimits
		want       result
		warning    string
		incomplete string
	}{
		"Background": {
			reason:  "The default policy of a custom resource is background: the locked child would be deleted.",
			req:     ownerDelete(""),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"BackgroundAuditOnly": {
			reason:  "A dependent only a Lock in Audit enforcement covers refuses nothing (docs/contract.md rule 20): the cascade goes ahead, with the refusal it would have got as a warning.",
			req:     ownerDelete(""),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index: ByTarget(func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
				if key.Name == "db" {
					return []lockv1alpha1.Lock{auditing(*newLock("forge", "watch-db", "", key.Kind, "db"))}, nil
				}
				return nil, nil
			}),
			want:    allowed,
			warning: WouldDenyWarning(denied([]string{"watch-db"}, "PostgresCluster/db").Message),
		},
		"Foreground": {
			reason:  "Foreground deletes the dependents too.",
			req:     ownerDelete(metav1.DeletePropagationForeground),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"ForegroundFinalizer": {
			reason:  "Without options, the object's foregroundDeletion finalizer sets the policy.",
			req:     ownerDelete("", metav1.FinalizerDeleteDependents),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"Orphan": {
			reason:  "Orphan deletes no dependent: allowed, with a warning naming the locked ones.",
			req:     ownerDelete(metav1.DeletePropagationOrphan),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    allowed,
			warning: "the dependents of this resource are orphaned, not deleted; locked dependents that stay: PostgresCluster/db (Lock(s) [keep-db])",
		},
		"OrphanFinalizer": {
			reason:  "Without options, the object's orphan finalizer orphans.",
			req:     ownerDelete("", metav1.FinalizerOrphanDependents),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    allowed,
			warning: "the dependents of this resource are orphaned, not deleted; locked dependents that stay: PostgresCluster/db (Lock(s) [keep-db])",
		},
		"OrphanDependentsTrue": {
			reason: "The deprecated orphanDependents wins over the finalizers.",
			req: func() Request {
				r := ownerDelete("", metav1.FinalizerDeleteDependents)
				r.Options.OrphanDependents = ptr.To(true)
				return r
			}(),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    allowed,
			warning: "the dependents of this resource are orphaned, not deleted; locked dependents that stay: PostgresCluster/db (Lock(s) [keep-db])",
		},
		"OrphanDependentsFalse": {
			reason: "orphanDependents false is background, whatever the orphan finalizer.",
			req: func() Request {
				r := ownerDelete("", metav1.FinalizerOrphanDependents)
				r.Options.OrphanDependents = ptr.To(false)
				return r
			}(),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"PolicyOverFinalizer": {
			reason:  "An explicit Background wins over the object's orphan finalizer.",
			req:     ownerDelete(metav1.DeletePropagationBackground, metav1.FinalizerOrphanDependents),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")},
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"NoLockedDependent": {
			reason:  "A cascade that reaches no locked object keeps the object guard's answer, without warning.",
			req:     ownerDelete(""),
			objects: append([]graphObject{obj("PostgresCluster", "other", "Stack/root")}, chain...),
			index:   locksOn("unrelated"),
			want:    allowed,
		},
		"SurvivingSecondOwner": {
			reason:  "A child with another owner that stays is not deleted.",
			req:     ownerDelete(""),
			objects: []graphObject{obj("Stack", "other"), obj("PostgresCluster", "db", "Stack/root", "Stack/other")},
			index:   locksOn("db"),
			want:    allowed,
		},
		"DanglingSecondOwner": {
			reason:  "An owner that does not exist keeps nothing.",
			req:     ownerDelete(""),
			objects: []graphObject{obj("PostgresCluster", "db", "Stack/root", "Stack/gone")},
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"ReplacedSecondOwner": {
			reason: "An owner of the same name with another UID is dangling too.",
			req:    ownerDelete(""),
			objects: []graphObject{
				with(obj("Stack", "other"), func(m *metav1.PartialObjectMetadata) { m.UID = "another" }),
				obj("PostgresCluster", "db", "Stack/root", "Stack/other"),
			},
			index: locksOn("db"),
			want:  denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"SecondOwnerBeingDeleted": {
			reason: "An owner being deleted does not keep the child.",
			req:    ownerDelete(""),
			objects: []graphObject{
				with(obj("Stack", "other"), func(m *metav1.PartialObjectMetadata) { m.DeletionTimestamp = &metav1.Time{} }),
				obj("PostgresCluster", "db", "Stack/root", "Stack/other"),
			},
			index: locksOn("db"),
			want:  denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"OwnerOutsideTheGroup": {
			reason: "An owner lockguard cannot see (a ConfigMap) is taken to stay: allowed (the object guard still denies the collector's delete).",
			req:    ownerDelete(""),
			objects: []graphObject{with(obj("PostgresCluster", "db", "Stack/root"), func(m *metav1.PartialObjectMetadata) {
				m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "cm", UID: "uid-cm"})
			})},
			index: locksOn("db"),
			want:  allowed,
		},
		"ThreeLevels": {
			reason:  "The cascade follows chains: root, mid, db.",
			req:     ownerDelete(""),
			objects: chain,
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"OrphanFinalizerMidway": {
			reason: "In a background cascade, an object with the orphan finalizer is deleted with Orphan: its dependents stay.",
			req:    ownerDelete(""),
			objects: []graphObject{
				with(obj("Stack", "mid", "Stack/root"), func(m *metav1.PartialObjectMetadata) { m.Finalizers = []string{metav1.FinalizerOrphanDependents} }),
				obj("PostgresCluster", "db", "Stack/mid"),
			},
			index: locksOn("db"),
			want:  allowed,
		},
		"OrphanFinalizerMidwayForeground": {
			reason: "In a foreground cascade, the collector deletes an object that has dependents in the foreground, whatever its finalizers.",
			req:    ownerDelete(metav1.DeletePropagationForeground),
			objects: []graphObject{
				with(obj("Stack", "mid", "Stack/root"), func(m *metav1.PartialObjectMetadata) { m.Finalizers = []string{metav1.FinalizerOrphanDependents} }),
				obj("PostgresCluster", "db", "Stack/mid"),
			},
			index: locksOn("db"),
			want:  denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"Diamond": {
			reason: "A child of two objects both in the cascade is deleted, whichever the walk reaches first.",
			req:    ownerDelete(""),
			objects: []graphObject{
				obj("PostgresCluster", "db", "Stack/b", "Stack/a"),
				obj("Stack", "a", "Stack/root"),
				obj("Stack", "b", "Stack/a"),
			},
			index: locksOn("db"),
			want:  denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"MidLockedToo": {
			reason:  "Every locked object of the cascade is named, its Locks sorted.",
			req:     ownerDelete(""),
			objects: chain,
			index:   locksOn("db", "mid"),
			want:    denied([]string{"keep-db", "keep-mid"}, "PostgresCluster/db", "Stack/mid"),
		},
		"LockedRoot": {
			reason:  "A locked owner keeps the object guard's answer (rule 1).",
			req:     ownerDelete(""),
			objects: chain,
			index:   locksOn("root", "db"),
			want: result{Code: 403, Reason: metav1.StatusReasonForbidden,
				Message: "resource is protected by Lock(s) [keep-root]; delete the Lock(s) before deleting this resource"},
		},
		"CacheLags": {
			reason:  "The cache holds no Lock on the cascade, the API server does: denied.",
			req:     ownerDelete(""),
			objects: chain,
			index:   locksOn(),
			api:     []lockv1alpha1.Lock{*newLock("forge", "keep-db", "", "PostgresCluster", "db"), *newLock("other", "elsewhere", "", "PostgresCluster", "db")},
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"CacheLagsFreshnessMayLack": {
			reason:  "The Freshness says the index may lack a Lock of a dependent (a pending create, a cold replica): confirmed, denied.",
			req:     ownerDelete(""),
			objects: chain,
			index:   locksOn(),
			api:     []lockv1alpha1.Lock{*newLock("forge", "keep-db", "", "PostgresCluster", "db")},
			fresh:   ptr.To(true),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"FreshnessCannotLack": {
			reason:  "The Freshness proves the index lacks no Lock of a dependent: allowed from the index, no read (the API server's Lock stands for one the proof says cannot exist).",
			req:     ownerDelete(""),
			objects: chain,
			index:   locksOn(),
			api:     []lockv1alpha1.Lock{*newLock("forge", "keep-db", "", "PostgresCluster", "db")},
			fresh:   ptr.To(false),
			want:    allowed,
		},
		"Warn": {
			reason:  "Mode Warn allows with a warning naming the Locks.",
			req:     ownerDelete(""),
			objects: chain,
			index:   locksOn("db"),
			mode:    CascadeWarn,
			want:    allowed,
			warning: CascadeWarning([]lockv1alpha1.Lock{lock("keep-db", "")}, []string{"PostgresCluster/db"}),
		},
		"Unsynced": {
			reason:     "A graph that cannot tell: allowed with a warning, counted.",
			req:        ownerDelete(""),
			graphErr:   errors.New("the metadata cache of Stack.core.navique.com has not synced yet"),
			index:      locksOn("db"),
			want:       allowed,
			warning:    "lockguard could not check all of this delete's cascade (the metadata cache of Stack.core.navique.com has not synced yet): if the garbage collector reaches a locked resource, its delete is denied and the cascade stops there",
			incomplete: IncompleteUnsynced,
		},
		"TooDeep": {
			reason:     "A chain longer than MaxDepth: allowed with a warning, counted.",
			req:        ownerDelete(""),
			objects:    chain,
			index:      locksOn("db"),
			limits:     CascadeLimits{MaxDepth: 1},
			want:       allowed,
			warning:    "lockguard could not check all of this delete's cascade (owner chains longer than 1): if the garbage collector reaches a locked resource, its delete is denied and the cascade stops there",
			incomplete: IncompleteDepth,
		},
		"TooMany": {
			reason:     "More dependents than MaxObjects: allowed with a warning, counted.",
			req:        ownerDelete(""),
			objects:    []graphObject{obj("Stack", "a", "Stack/root"), obj("Stack", "b", "Stack/root"), obj("PostgresCluster", "db", "Stack/b")},
			index:      locksOn("db"),
			limits:     CascadeLimits{MaxObjects: 2},
			want:       allowed,
			warning:    "lockguard could not check all of this delete's cascade (more than 2 dependents): if the garbage collector reaches a locked resource, its delete is denied and the cascade stops there",
			incomplete: IncompleteObjects,
		},
		"BoundButFound": {
			reason:     "A locked dependent found before a bound is hit is enough to deny.",
			req:        ownerDelete(""),
			objects:    chain,
			index:      locksOn("mid"),
			limits:     CascadeLimits{MaxDepth: 1},
			want:       denied([]string{"keep-mid"}, "Stack/mid"),
			incomplete: IncompleteDepth,
		},
		"DeleteCollection": {
			reason: "A deletecollection names its object in oldObject only.",
			req: func() Request {
				r := ownerDelete("")
				r.Name = ""
				return r
			}(),
			objects: chain,
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"DryRun": {
			reason: "A dry run gets the same answer.",
			req: func() Request {
				r := ownerDelete("")
				r.DryRun = true
				return r
			}(),
			objects: chain,
			index:   locksOn("db"),
			want:    denied([]string{"keep-db"}, "PostgresCluster/db"),
		},
		"LockDelete": {
			reason: "Deleting a Lock is never blocked, whatever it owns.",
			req: func() Request {
				r := ownerDelete("")
				r.Kind.Kind = "Lock"
				return r
			}(),
			objects: chain,
			index:   locksOn("db"),
			want:    result{Allowed: true, Code: 200, Message: lockv1alpha1.ErrLockTarget.Error()},
		},
	}
	// Each case is decided over the graph, and again over the API
	// server's lists of the same objects while the graph has not synced
	// ("/listed"): the answers must be the same (cascadelisted.go).
	for name, tc := range cases {
		for _, listed := range []bool{false, true} {
			if listed && tc.graphErr != nil {
				continue
			}
			if listed {
				name += "/listed"
			}
			t.Run(name, func(t *testing.T) {
				mode := tc.mode
				if mode == "" {
					mode = CascadeDeny
				}
				m := NewMetrics()
				reg := prometheus.NewRegistry()
				if err := m.Register(reg); err != nil {
					t.Fatal(err)
				}
				var live LockLister
				if tc.api != nil {
					live = &fakeAPI{locks: tc.api}
				}
				cascade := CascadeConfig{Graph: &fakeGraph{objects: tc.objects, err: tc.graphErr}, Mode: mode, Limits: tc.limits}
				if listed {
					cascade.Graph = &fakeGraph{err: errors.New("the metadata cache of Stack.core.navique.com has not synced yet")}
					cascade.API, cascade.Kinds = &objectsAPI{objects: tc.objects}, forgeKinds
				}
				c := Config{Locks: tc.index, Live: live, Metrics: m, Cascade: cascade}
				var f *freshness
				if tc.fresh != nil {
					f = &freshness{mayLack: *tc.fresh, calls: new([]string)}
					c.Freshness = f
				}
				decideCascadeCase(t, NewHandler(c), m, tc.reason, tc.req, tc.want, tc.warning, tc.incomplete)
				if listed && f != nil && !slices.Contains(f.confirmed, ReasonOwners) {
					t.Errorf("confirmations %q, want one of reason %q", f.confirmed, ReasonOwners)
				}
			})
		}
	}
}

// decideCascadeCase fails t unless h decides req as want, with
// wantWarning (none for "") and incomplete (none for "") alone counted in
// m's lockguard_cascade_incomplete_total; reason says why.
func decideCascadeCase(t *testing.T, h *Handler, m *Metrics, reason string, req Request, want result, wantWarning, incomplete string) {
	t.Helper()
	resp := h.Decide(context.Background(), req)
	if diff := cmp.Diff(want, resultOf(resp)); diff != "" {
		t.Errorf("%s\nDecide(...): -want, +got:\n%s", reason, diff)
	}
	var warning string
	if len(resp.Warnings) > 0 {
		warning = resp.Warnings[0]
	}
	if diff := cmp.Diff(wantWarning, warning); diff != "" {
		t.Errorf("%s\nDecide(...) warning: -want, +got:\n%s", reason, diff)
	}
	for _, r := range []string{IncompleteDepth, IncompleteObjects, IncompleteUnsynced, IncompleteDeadline} {
		n := 0.0
		if r == incomplete {
			n = 1
		}
		if got := testutil.ToFloat64(m.incomplete.WithLabelValues(r)); got != n {
			t.Errorf("%s\nlockguard_cascade_incomplete_total{reason=%q} = %v, want %v", reason, r, got, n)
		}
	}
}

// TestCascadeMetricsAndAudit: a cascade denial is counted under guard
// cascade, and its audit annotations name the decision, the guard and the
// Locks.
func TestCascadeMetricsAndAudit(t *testing.T) {
	m := NewMetrics()
	if err := m.Register(prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	graph := &fakeGraph{objects: []graphObject{obj("PostgresCluster", "db", "Stack/root")}}
	h := NewHandler(Config{Locks: locksOn("db"), Metrics: m, Cascade: CascadeConfig{Graph: graph, Mode: CascadeDeny, Limits: CascadeLimits{}}})
	resp := h.Decide(context.Background(), ownerDelete(""))
	want := map[string]string{AuditDecision: DecisionDenied, AuditGuard: GuardCascade, AuditLocks: "keep-db"}
	if diff := cmp.Diff(want, resp.AuditAnnotations); diff != "" {
		t.Errorf("audit annotations: -want, +got:\n%s", diff)
	}
	if got := testutil.ToFloat64(m.reviewsTotal.WithLabelValues(GuardCascade, DecisionDenied)); got != 1 {
		t.Errorf("reviews{guard=cascade,decision=denied} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.deniedTotal.WithLabelValues(GuardCascade, "forge", lockv1alpha1.Group, "Stack", "false")); got != 1 {
		t.Errorf("denied{guard=cascade} = %v, want 1", got)
	}
	resp = h.Decide(context.Background(), request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "free", "free"))
	want = map[string]string{AuditDecision: DecisionAllowed, AuditGuard: GuardObject}
	if diff := cmp.Diff(want, resp.AuditAnnotations); diff != "" {
		t.Errorf("audit annotations of an allowed delete: -want, +got:\n%s", diff)
	}
}

// TestCascadeMessageCapped: a cascade reaching thousands of locked
// dependents gets a short message naming ten Locks and ten dependents.
func TestCascadeMessageCapped(t *testing.T) {
	var locks []lockv1alpha1.Lock
	var deps []string
	for i := range 5000 {
		locks = append(locks, lock(fmt.Sprintf("keep-%04d", i), ""))
		deps = append(deps, fmt.Sprintf("PostgresCluster/db-%04d", i))
	}
	msg := CascadeDenialMessage(locks, deps)
	const want = "resource would cascade-delete resources protected by Lock(s) [keep-0000 keep-0001 keep-0002 keep-0003 keep-0004 keep-0005 keep-0006 keep-0007 keep-0008 keep-0009 and 4990 more]; "
	if len(msg) > 1024 || msg[:len(want)] != want {
		t.Errorf("CascadeDenialMessage: %d bytes: %q; want under 1 KiB, starting %q", len(msg), msg, want)
	}
}

// TestParseCascadeMode: the modes are spelled as the chart's
// guards.cascade spells them, and nothing else is accepted.
func TestParseCascadeMode(t *testing.T) {
	for _, s := range []string{"Deny", "Warn", "Off"} {
		if m, err := ParseCascadeMode(s); err != nil || string(m) != s {
			t.Errorf("ParseCascadeMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "deny", "Orphan", "true"} {
		if _, err := ParseCascadeMode(s); err == nil {
			t.Errorf("ParseCascadeMode(%q) accepted", s)
		}
	}
}

// TestCascadeOff: with mode Off the handler walks nothing (the graph is
// never asked).
func TestCascadeOff(t *testing.T) {
	graph := &fakeGraph{err: errors.New("asked")}
	h := NewHandler(Config{Locks: locksOn("db"), Cascade: CascadeConfig{Graph: graph, Mode: CascadeOff, Limits: CascadeLimits{}}})
	if resp := h.Decide(context.Background(), ownerDelete("")); !resp.Allowed || len(resp.Warnings) > 0 || h.cascadeOf() != nil {
		t.Errorf("Decide with the cascade guard off: %+v", resp)
	}
}
