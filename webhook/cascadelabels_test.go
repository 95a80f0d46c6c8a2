package webhook

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// keepingGraph is a fakeGraph that keeps, of its objects' labels, only
// those whose keys kept holds (LabelKeeper): complete or not, at
// generation gen, which each read (asks) moves by step.
type keepingGraph struct {
	fakeGraph
	complete  bool
	gen, step int
	kept      []string
	asked     [][]lockv1alpha1.Lock
	reads     int
}

func (g *keepingGraph) LabelGeneration(string) (int, bool) {
	g.reads++
	g.gen += g.step
	return g.gen, g.complete
}

func (g *keepingGraph) KeepsLabels(_ string, locks []lockv1alpha1.Lock) bool {
	g.asked = append(g.asked, locks)
	for _, l := range locks {
		for k := range l.Spec.Selector.MatchLabels {
			if !slices.Contains(g.kept, k) {
				return false
			}
		}
	}
	return true
}

// withWidgets is forgeKinds and a kind no dependent is of.
func withWidgets() ([]schema.GroupVersionKind, error) {
	kinds, _ := forgeKinds()
	return append(kinds, schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Widget"}), nil
}

// TestCascadeLabelsKept (issue 38): the cascade guard decides from the
// owner graph's labels only where the graph says it keeps every label
// that the namespace's selector Locks read (LabelKeeper), before the walk
// and at the same generation after the Lock index was read; where it is
// still storing its objects again with a new key, where a key was added
// during the walk, or where a Lock the index may lack reads a key it
// does not keep, it reads the labels of the dependents it walked as the
// API server lists them (a list of each of their kinds, not of every
// kind: one whose list fails, as a kind whose CRD was just deleted, is
// not read), and a list that fails refuses the delete.
func TestCascadeLabelsKept(t *testing.T) {
	db := map[string]string{"tier": "db"}
	tierDB := selectorLock("forge", "tier-db", lockv1alpha1.LockSelector{MatchLabels: db})
	// The graph's db has lost its label (not kept); the API server's has it.
	cached := []graphObject{obj("Stack", "mid", "Stack/root"), obj("PostgresCluster", "db", "Stack/mid")}
	listed := []graphObject{obj("Stack", "mid", "Stack/root"), with(obj("PostgresCluster", "db", "Stack/mid"), func(m *metav1.PartialObjectMetadata) { m.Labels = db })}
	denied := result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
		Message: CascadeDenialMessage([]lockv1alpha1.Lock{tierDB}, []string{"PostgresCluster/db"})}
	cases := map[string]struct {
		graph   *keepingGraph
		index   selectorIndex
		mayLack bool
		apiErr  error
		failing string // the kind whose list fails with apiErr ("": every kind)
		want    result
		lists   []string
	}{
		"Complete": {
			graph: &keepingGraph{fakeGraph: fakeGraph{objects: listed}, complete: true, kept: []string{"tier"}},
			index: selectorIndex{tierDB},
			want:  denied,
		},
		"Refreshing": {
			graph: &keepingGraph{fakeGraph: fakeGraph{objects: cached}, kept: []string{"tier"}},
			index: selectorIndex{tierDB},
			want:  denied, lists: []string{"Stack/forge/", "PostgresCluster/forge/"},
		},
		"LockNotIndexedYet": {
			graph:   &keepingGraph{fakeGraph: fakeGraph{objects: cached}, complete: true},
			mayLack: true,
			want:    denied, lists: []string{"Stack/forge/", "PostgresCluster/forge/"},
		},
		"KeyAddedDuringTheWalk": {
			graph: &keepingGraph{fakeGraph: fakeGraph{objects: cached}, complete: true, step: 1, kept: []string{"tier"}},
			index: selectorIndex{tierDB},
			want:  denied, lists: []string{"Stack/forge/", "PostgresCluster/forge/"},
		},
		"RefreshingListFails": {
			graph:  &keepingGraph{fakeGraph: fakeGraph{objects: cached}, kept: []string{"tier"}},
			index:  selectorIndex{tierDB},
			apiErr: errors.New("connection refused"),
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not read the labels of the dependents of Stack.core.navique.com forge/root from the API server (its cache is refreshing the labels that selector Locks read), so the delete is refused; retry: listing Stack.core.navique.com in namespace forge from the API server: connection refused"},
			lists: []string{"Stack/forge/"},
		},
		"OtherKindFails": {
			graph:   &keepingGraph{fakeGraph: fakeGraph{objects: cached}, kept: []string{"tier"}},
			index:   selectorIndex{tierDB},
			apiErr:  errors.New("the server could not find the requested resource"),
			failing: "Widget",
			want:    denied, lists: []string{"Stack/forge/", "PostgresCluster/forge/"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objects := &objectsAPI{objects: listed, err: tc.apiErr, failing: tc.failing}
			f := &freshness{mayLack: tc.mayLack, pending: tc.mayLack, calls: new([]string)}
			h := NewHandler(Config{Locks: tc.index, Live: &fakeAPI{locks: []lockv1alpha1.Lock{tierDB}}, Freshness: f,
				Cascade: CascadeConfig{Graph: tc.graph, Mode: CascadeDeny, API: objects, Kinds: withWidgets}})
			if diff := cmp.Diff(tc.want, resultOf(h.Decide(context.Background(), ownerDelete("")))); diff != "" {
				t.Errorf("Decide(...): -want, +got:\n%s", diff)
			}
			if !slices.Equal(objects.lists, tc.lists) {
				t.Errorf("lists of the API server %q, want %q (the dependents' kinds)", objects.lists, tc.lists)
			}
			if tc.graph.reads != 2 {
				t.Errorf("the graph's label generation read %d times, want twice (before the walk, after the index)", tc.graph.reads)
			}
			if tc.mayLack && (len(tc.graph.asked) != 1 || len(tc.graph.asked[0]) != 1 || tc.graph.asked[0][0].Name != tierDB.Name) {
				t.Errorf("the graph was asked of Locks %v, want the API server's tier-db", tc.graph.asked)
			}
		})
	}
}
