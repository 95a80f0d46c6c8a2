package webhook

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// holder is a Locks that also tells whether it holds a Lock of a
// namespace (NamespaceHolder), as readmodel.LockIndex does
// (TestHoldsLocksInAgrees checks the index's answer against its lookups).
type holder struct {
	Locks
	held map[string]bool
	err  error
}

func (h holder) HoldsLocksIn(ns string) (bool, error) { return h.held[ns], h.err }

// nsFresh is a Freshness that may lack the Locks of the namespaces in
// lacking (a pending create there, or cold), and answers per namespace
// too (NamespaceFreshness), as internal/peers does.
type nsFresh struct{ lacking map[string]bool }

func (f nsFresh) MayLack(key lockv1alpha1.TargetKey) (string, bool) {
	return "marker", f.lacking[key.Namespace]
}
func (nsFresh) Confirmed(string)                          {}
func (nsFresh) PendingCreate(lockv1alpha1.TargetKey) bool { return false }
func (f nsFresh) MayLackIn(ns string) bool                { return f.lacking[ns] }

// keyFresh is nsFresh without MayLackIn: a Freshness that answers per key only.
type keyFresh struct{ f nsFresh }

func (k keyFresh) MayLack(key lockv1alpha1.TargetKey) (string, bool) { return k.f.MayLack(key) }
func (keyFresh) Confirmed(string)                                    {}
func (keyFresh) PendingCreate(lockv1alpha1.TargetKey) bool           { return false }

// fakeLister is an API server holding no Lock.
func fakeLister(t *testing.T, s *runtime.Scheme) LockLister {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(s).Build()
}

// failingLister is an API server that cannot be read.
func failingLister(t *testing.T) LockLister {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(lockScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("connection refused")
		},
	}).Build()
}

// TestNothingIn: a reader says that nothing of a namespace is locked only
// when its index says it holds no Lock there and, when it confirms, its
// Freshness says the index lacks none there; any doubt is the full path.
func TestNothingIn(t *testing.T) {
	s := lockScheme(t)
	api := fakeLister(t, s)
	none := map[string]bool{}
	forge := map[string]bool{"forge": true}
	cases := []struct {
		name   string
		reader *lockReader
		want   bool
	}{
		{"an index that cannot say", newLockReader(locksOn(), nil, nil, nil, nil), false},
		{"cache-only, no Lock of forge", newLockReader(holder{Locks: locksOn(), held: none}, nil, nil, nil, nil), true},
		{"cache-only, a Lock of forge", newLockReader(holder{Locks: locksOn(), held: forge}, nil, nil, nil, nil), false},
		{"cache-only, the index has not synced", newLockReader(holder{Locks: locksOn(), err: errors.New("not synced")}, nil, nil, nil, nil), false},
		{"confirming without a Freshness", newLockReader(holder{Locks: locksOn(), held: none}, api, nil, nil, nil), false},
		{"confirming, a Freshness that answers per key only", newLockReader(holder{Locks: locksOn(), held: none}, api, nil, keyFresh{}, nil), false},
		{"confirming, the index may lack a Lock of forge", newLockReader(holder{Locks: locksOn(), held: none}, api, nil, nsFresh{lacking: forge}, nil), false},
		{"confirming, it may lack one elsewhere only", newLockReader(holder{Locks: locksOn(), held: none}, api, nil, nsFresh{lacking: map[string]bool{"other": true}}, nil), true},
		{"confirming, a Lock of forge", newLockReader(holder{Locks: locksOn(), held: forge}, api, nil, nsFresh{}, nil), false},
	}
	for _, tc := range cases {
		if got := tc.reader.nothingIn("forge"); got != tc.want {
			t.Errorf("%s: nothingIn(forge) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestNothingInReadsNothing: where nothing of the namespace is locked,
// covering answers no Lock for each object without asking the index's
// lookups or the API server (which would fail here).
func TestNothingInReadsNothing(t *testing.T) {
	lookups := ByTarget(func(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		t.Errorf("LiveLocks(%s): the index was read", key)
		return nil, nil
	})
	r := newLockReader(holder{Locks: lookups, held: map[string]bool{}}, failingLister(t), nil, nsFresh{}, nil)
	objs := []lockv1alpha1.Object{forgeStack.Object(nil), forgeStack.Object(map[string]string{"tier": "db"})}
	found, err := r.covering(context.Background(), "forge", objs)
	if err != nil || len(found) != len(objs) {
		t.Fatalf("covering = %v, %v; want %d empty answers", found, err, len(objs))
	}
	for i, locks := range found {
		if len(locks) > 0 {
			t.Errorf("covering[%d] = %v, want none", i, locks)
		}
	}
}

// TestCascadeNothingIn: the cascade guard does not walk the cascade of an
// owner whose namespace holds no Lock, nor may (its graph is not even
// asked, and so cannot say its walk was incomplete); with a Lock in the
// namespace it walks as before (here the graph has not synced: allowed,
// with a warning and lockguard_cascade_incomplete_total).
func TestCascadeNothingIn(t *testing.T) {
	for _, held := range []bool{false, true} {
		m := NewMetrics()
		if err := m.Register(prometheus.NewRegistry()); err != nil {
			t.Fatal(err)
		}
		graph := &fakeGraph{err: errors.New("the owner index has not synced")}
		locks := holder{Locks: locksOn(), held: map[string]bool{"forge": held}}
		h := NewHandler(Config{Locks: locks, Metrics: m, Cascade: CascadeConfig{Graph: graph, Mode: CascadeDeny}})
		resp := h.Decide(context.Background(), ownerDelete(""))
		incomplete := testutil.ToFloat64(m.incomplete.WithLabelValues(IncompleteUnsynced))
		if !resp.Allowed || (len(resp.Warnings) > 0) != held || (incomplete == 1) != held {
			t.Errorf("a Lock in forge %v: allowed %v, warnings %q, incomplete{unsynced} %v; want allowed, a warning and 1 only with a Lock in forge",
				held, resp.Allowed, resp.Warnings, incomplete)
		}
	}
}
