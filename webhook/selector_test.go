package webhook

import (
	"time"

	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// selectorIndex is a Locks over fixed live Locks (NoLocks answers the
// lookups of every namespace's Locks).
type selectorIndex []lockv1alpha1.Lock

func (x selectorIndex) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	var out []lockv1alpha1.Lock
	for _, l := range x {
		if k, live := l.LiveTarget(time.Time{}); live && k == key {
			out = append(out, l)
		}
	}
	return out, nil
}

func (x selectorIndex) LiveSelectorLocksIn(ns string) ([]lockv1alpha1.Lock, error) {
	var out []lockv1alpha1.Lock
	for _, l := range x {
		if l.Namespace == ns && l.HasSelector() && l.Live(time.Time{}) {
			out = append(out, l)
		}
	}
	return out, nil
}

func (x selectorIndex) LiveSelectorLocksCovering(ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	selectors, err := x.LiveSelectorLocksIn(ns)
	return Covering(selectors, objs, time.Time{}), err
}

func (selectorIndex) LiveSelectorLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	return NoLocks{}.LiveSelectorLocksOfKind(gk)
}

func (selectorIndex) LiveLocksIn(ns string) ([]lockv1alpha1.Lock, error) {
	return NoLocks{}.LiveLocksIn(ns)
}

func (selectorIndex) LiveLocksOfKind(gk schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	return NoLocks{}.LiveLocksOfKind(gk)
}

func (selectorIndex) AnyLiveLocks(limit int) ([]lockv1alpha1.Lock, int, error) {
	return NoLocks{}.AnyLiveLocks(limit)
}

func selectorLock(ns, name string, s lockv1alpha1.LockSelector) lockv1alpha1.Lock {
	return lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: lockv1alpha1.LockSpec{Selector: &s}}
}

// stackDelete is the DELETE of Stack forge/name whose oldObject carries
// labels.
func stackDelete(name string, labels map[string]string) Request {
	r := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", name, name)
	r.OldObject.Metadata.Labels = labels
	return r
}

// TestSelectorGuards: every guard follows selector Locks (docs/contract.md rule
// 15), from the cache and, where the cache would allow, from the API
// server's Locks; a delete whose object's labels cannot be read is refused
// while a selector Lock could cover it.
func TestSelectorGuards(t *testing.T) {
	db := map[string]string{"tier": "db"}
	tierDB := selectorLock("forge", "tier-db", lockv1alpha1.LockSelector{MatchLabels: db})
	all := selectorLock("forge", "all", lockv1alpha1.LockSelector{})
	widgets := selectorLock("forge", "widgets", lockv1alpha1.LockSelector{Kinds: []string{"Widget"}})
	objects := map[schema.GroupKind]map[string]map[string]bool{stackGK: {"forge": {"db": true, "web": true}}}
	labelled := map[string]map[string]string{"forge/db": db}
	served := func() ([]schema.GroupKind, error) { return []schema.GroupKind{stackGK, widgetGK}, nil }
	noOld := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", "db", "")
	denied := func(msg string) result {
		return result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: msg}
	}
	allowed := result{Allowed: true, Code: http.StatusOK}
	cases := map[string]struct {
		reason string
		index  selectorIndex
		api    *fakeAPI
		req    Request
		want   result
	}{
		"ObjectCovered": {
			reason: "An object whose oldObject carries tier=db is covered by a tier=db Lock in the cache.",
			index:  selectorIndex{tierDB}, api: &fakeAPI{}, req: stackDelete("db", db),
			want: denied(DenialMessage([]lockv1alpha1.Lock{tierDB})),
		},
		"ObjectRelabelled": {
			reason: "An object relabelled out of the selector is not covered.",
			index:  selectorIndex{tierDB}, api: &fakeAPI{}, req: stackDelete("db", map[string]string{"tier": "web"}),
			want: allowed,
		},
		"ObjectCacheLags": {
			reason: "A selector Lock only the API server has yet denies: the allowed delete is confirmed.",
			index:  selectorIndex{}, api: &fakeAPI{locks: []lockv1alpha1.Lock{all}}, req: stackDelete("web", nil),
			want: denied(DenialMessage([]lockv1alpha1.Lock{all})),
		},
		"ObjectOtherKind": {
			reason: "A selector Lock limited to Widgets does not cover a Stack.",
			index:  selectorIndex{widgets}, api: &fakeAPI{}, req: stackDelete("db", db),
			want: allowed,
		},
		"ObjectLabelsUnknown": {
			reason: "Without an oldObject, a selector Lock that could cover the kind refuses the delete (fail closed).",
			index:  selectorIndex{tierDB}, api: &fakeAPI{}, req: noOld,
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not read the labels of Stack.core.navique.com forge/db (the request carries no oldObject), and selector Lock(s) [tier-db] may protect it, so the delete is refused"},
		},
		"NamespaceAll": {
			reason: "An empty selector Lock holds its namespace, whatever it holds.",
			index:  selectorIndex{}, api: &fakeAPI{locks: []lockv1alpha1.Lock{all}}, req: namespaceRequest("forge"),
			want: denied(NamespaceDenialMessage("forge", []lockv1alpha1.Lock{all})),
		},
		"NamespaceCovered": {
			reason: "A tier=db Lock holds its namespace while it covers an existing object.",
			index:  selectorIndex{}, api: &fakeAPI{locks: []lockv1alpha1.Lock{tierDB}, objects: objects, labels: labelled}, req: namespaceRequest("forge"),
			want: denied(NamespaceDenialMessage("forge", []lockv1alpha1.Lock{tierDB})),
		},
		"NamespaceNothingCovered": {
			reason: "A selector Lock that covers no existing object does not hold its namespace.",
			index:  selectorIndex{}, api: &fakeAPI{locks: []lockv1alpha1.Lock{tierDB}, objects: objects}, req: namespaceRequest("forge"),
			want: allowed,
		},
		"CRDCovered": {
			reason: "A selector Lock covering an existing Stack holds the Stack CRD.",
			index:  selectorIndex{}, api: &fakeAPI{locks: []lockv1alpha1.Lock{tierDB}, objects: objects, labels: labelled}, req: crdRequest(lockv1alpha1.Group, "Stack"),
			want: denied(CRDDenialMessage([]lockv1alpha1.Lock{tierDB})),
		},
		"ObjectAudit": {
			reason: "A selector Lock in Audit enforcement refuses nothing (docs/contract.md rule 20), in the cache and the API server.",
			index:  selectorIndex{auditing(tierDB)}, api: &fakeAPI{locks: []lockv1alpha1.Lock{auditing(tierDB)}}, req: stackDelete("db", db),
			want: allowed,
		},
		"ObjectLabelsUnknownAudit": {
			reason: "Without an oldObject, only a selector Lock that enforces fails the delete closed.",
			index:  selectorIndex{auditing(tierDB)}, api: &fakeAPI{locks: []lockv1alpha1.Lock{auditing(tierDB)}}, req: noOld,
			want: allowed,
		},
		"NamespaceAllAudit": {
			reason: "An empty selector Lock in Audit enforcement does not hold its namespace.",
			index:  selectorIndex{}, api: &fakeAPI{locks: []lockv1alpha1.Lock{auditing(all)}}, req: namespaceRequest("forge"),
			want: allowed,
		},
		"CRDOtherKind": {
			reason: "A selector Lock limited to Widgets does not hold the Stack CRD.",
			index:  selectorIndex{}, api: &fakeAPI{locks: []lockv1alpha1.Lock{widgets}, objects: objects, labels: labelled}, req: crdRequest(lockv1alpha1.Group, "Stack"),
			want: allowed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := NewHandler(Config{Locks: tc.index, Live: tc.api, Cluster: &ClusterConfig{API: tc.api, Kinds: guardMapper(), Served: served}})
			resp := h.Decide(context.Background(), tc.req)
			if diff := cmp.Diff(tc.want, resultOf(resp)); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func (selectorIndex) StandingLocksCover(ns string, objs []lockv1alpha1.Object) (bool, error) {
	return NoLocks{}.StandingLocksCover(ns, objs)
}
