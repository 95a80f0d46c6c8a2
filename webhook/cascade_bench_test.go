package webhook

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// indexedGraph is an OwnerGraph indexed by owner, as readmodel.OwnerIndex
// is, for benchmarks.
type indexedGraph struct {
	byOwner map[types.UID][]graphObject
	byName  map[string]*metav1.PartialObjectMetadata
}

func (g *indexedGraph) Dependents(ns string, owner types.UID, fn func(schema.GroupKind, metav1.Object) bool) error {
	for _, o := range g.byOwner[owner] {
		if o.meta.Namespace == ns && !fn(o.gk, o.meta) {
			return nil
		}
	}
	return nil
}

func (g *indexedGraph) Owner(_ string, ref metav1.OwnerReference) (metav1.Object, bool) {
	if o := g.byName[ref.Kind+"/"+ref.Name]; o != nil {
		return o, true
	}
	return nil, true
}

// BenchmarkCascadeDecide is the cascade guard's decision in process (no
// API server, no confirming read) for the delete of an owner of n Stacks,
// none locked: the whole walk and a Lock lookup per descendant.
func BenchmarkCascadeDecide(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("descendants=%d", n), func(b *testing.B) {
			g := &indexedGraph{byOwner: map[types.UID][]graphObject{}, byName: map[string]*metav1.PartialObjectMetadata{}}
			for i := range n {
				o := obj("Stack", fmt.Sprintf("d-%d", i), "Stack/root")
				g.byOwner["uid-root"] = append(g.byOwner["uid-root"], o)
				g.byName["Stack/"+o.meta.Name] = o.meta
			}
			index := ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil })
			h := NewHandler(Config{Locks: index, Cascade: CascadeConfig{Graph: g, Mode: CascadeDeny, Limits: CascadeLimits{}}})
			req := ownerDelete("")
			for b.Loop() {
				if resp := h.Decide(context.Background(), req); !resp.Allowed || len(resp.Warnings) > 0 {
					b.Fatalf("Decide: %+v", resp)
				}
			}
		})
	}
}
