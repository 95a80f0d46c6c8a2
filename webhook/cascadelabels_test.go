package webhook

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// TestCascadeLabelsKept (issue 38): the cascade guard decides from the
// owner graph's labels only where the graph says it keeps every label
// that the namespace's selector Locks read (LabelKeeper), before the walk
// and at the same generation after the Lock index was read; where it is
// still storing its objects again with a new key, where a key was added
// during the walk, or where a Lock the index may lack reads a key it
// does not keep, it walks the namespace as the API server lists it,
// labels and all, and a list that fails refuses the delete.
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
		want    result
		lists   bool
	}{
		"Complete": {
			graph: &keepingGraph{fakeGraph: fakeGraph{objects: listed}, complete: true, kept: []string{"tier"}},
			index: selectorIndex{tierDB},
			want:  denied,
		},
		"Refreshing": {
			graph: &keepingGraph{fakeGraph: fakeGraph{objects: cached}, kept: []string{"tier"}},
			index: selectorIndex{tierDB},
			want:  denied, lists: true,
		},
		"LockNotIndexedYet": {
			graph:   &keepingGraph{fakeGraph: fakeGraph{objects: cached}, complete: true},
			mayLack: true,
			want:    denied, lists: true,
		},
		"KeyAddedDuringTheWalk": {
			graph: &keepingGraph{fakeGraph: fakeGraph{objects: cached}, complete: true, step: 1, kept: []string{"tier"}},
			index: selectorIndex{tierDB},
			want:  denied, lists: true,
		},
		"RefreshingListFails": {
			graph:  &keepingGraph{fakeGraph: fakeGraph{objects: cached}, kept: []string{"tier"}},
			index:  selectorIndex{tierDB},
			apiErr: errors.New("connection refused"),
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not read the dependents of Stack.core.navique.com forge/root from the API server (its cache is refreshing the labels that selector Locks read), so the delete is refused; retry when lockguard is ready: listing Stack.core.navique.com in namespace forge from the API server: connection refused"},
			lists: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			objects := &objectsAPI{objects: listed, err: tc.apiErr}
			f := &freshness{mayLack: tc.mayLack, pending: tc.mayLack, calls: new([]string)}
			h := NewHandler(Config{Locks: tc.index, Live: &fakeAPI{locks: []lockv1alpha1.Lock{tierDB}}, Freshness: f,
				Cascade: CascadeConfig{Graph: tc.graph, Mode: CascadeDeny, API: objects, Kinds: forgeKinds}})
			if diff := cmp.Diff(tc.want, resultOf(h.Decide(context.Background(), ownerDelete("")))); diff != "" {
				t.Errorf("Decide(...): -want, +got:\n%s", diff)
			}
			if got := len(objects.lists) > 0; got != tc.lists {
				t.Errorf("the namespace listed from the API server: %v (%q), want %v", got, objects.lists, tc.lists)
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
