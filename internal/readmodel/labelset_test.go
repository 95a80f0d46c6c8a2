package readmodel

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLabelTextOneBuffer: labelText makes its keys' slice and the text's
// buffer, each once and of its size (a strings.Builder grown by its
// writes kept 192 bytes for the 113 of these labels: a selector Lock's
// target's, whose labels are its own).
func TestLabelTextOneBuffer(t *testing.T) {
	l := map[string]string{"app.kubernetes.io/name": "forge", "app.kubernetes.io/part-of": "platform", "tier": "backend",
		"bench.navique.com/lock": "lock-0000001"}
	if got := testing.AllocsPerRun(100, func() { _ = labelText(l) }); got != 2 {
		t.Errorf("labelText: %v allocations; want 2 (the keys, the text)", got)
	}
}

// TestLabelSet checks that a labelSet reads as the map it was made from,
// for random label sets (empty values, keys that prefix others, keys
// with a prefix and a slash), through every reader: toMap, get, all and
// a Meta's GetLabels, Label and Partial.
func TestLabelSet(t *testing.T) {
	keys := []string{"a", "ab", "app", "app.kubernetes.io/name", "b", "core.navique.com/read-only", "tier", "x.y/z"}
	values := []string{"", "a", "forge", "backend", "true", "l-12345"}
	rng := rand.New(rand.NewPCG(1, 38))
	shared := newInterner()
	for i := range 2000 {
		l := map[string]string{}
		for range rng.IntN(len(keys) + 1) {
			l[keys[rng.IntN(len(keys))]] = values[rng.IntN(len(values))]
		}
		want := l
		if len(l) == 0 {
			want = nil
		}
		for _, s := range []*labelSet{newLabelSet(l), shared.labelSet(l)} {
			if diff := cmp.Diff(want, s.toMap()); diff != "" {
				t.Fatalf("case %d: toMap: -want, +got:\n%s", i, diff)
			}
			var order []string
			for k := range s.all() {
				order = append(order, k)
			}
			if !slices.IsSorted(order) || len(order) != len(l) {
				t.Fatalf("case %d: all yields %q, want the %d keys in order", i, order, len(l))
			}
			for _, k := range append(keys, "zz", "") {
				v, ok := s.get(k)
				wv, wok := l[k]
				if v != wv || ok != wok {
					t.Fatalf("case %d: get(%q) = %q, %v; want %q, %v", i, k, v, ok, wv, wok)
				}
			}
		}
		m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint(i), Namespace: "ns", Labels: maps.Clone(l)}}, shared)
		if diff := cmp.Diff(want, m.GetLabels()); diff != "" {
			t.Fatalf("case %d: GetLabels: -want, +got:\n%s", i, diff)
		}
		if diff := cmp.Diff(want, m.Partial(metav1.SchemeGroupVersion.WithKind("PartialObjectMetadata")).Labels); diff != "" {
			t.Fatalf("case %d: Partial's labels: -want, +got:\n%s", i, diff)
		}
		for k, v := range l {
			if got, ok := m.Label(k); got != v || !ok {
				t.Fatalf("case %d: Label(%q) = %q, %v; want %q, true", i, k, got, ok, v)
			}
		}
		// A map GetLabels returned is the caller's: changing it changes
		// neither the Meta nor another Meta with the same labels.
		if got := m.GetLabels(); got != nil {
			got["changed"] = "yes"
			if _, ok := m.Label("changed"); ok {
				t.Fatalf("case %d: a change to GetLabels' map reached the Meta", i)
			}
		}
	}
}
