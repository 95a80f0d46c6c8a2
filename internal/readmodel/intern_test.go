package readmodel

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInternerLabelSet(t *testing.T) {
	n := newInterner()
	a := n.labelSet(map[string]string{"app": "forge", "tier": "backend"})
	b := n.labelSet(map[string]string{"tier": "backend", "app": "forge"})
	c := n.labelSet(map[string]string{"app": "forge", "tier": "frontend"})
	if a != b {
		t.Error("two equal label sets: got two labelSets, want one shared")
	}
	if diff := cmp.Diff(map[string]string{"app": "forge", "tier": "frontend"}, c.toMap()); diff != "" {
		t.Errorf("labelSet: -want, +got:\n%s", diff)
	}
	if a == c {
		t.Error("two different label sets share a labelSet")
	}
	if got := n.labelSet(map[string]string{}); got != nil {
		t.Errorf("labelSet of no labels: got %v, want nil", got)
	}
}

func TestInternerBounded(t *testing.T) {
	n := newInterner()
	for i := range internLabelSets + 10 {
		n.labelSet(map[string]string{"i": string(rune('a' + i%26)), "n": string(rune(i))})
	}
	if len(n.sets) > internLabelSets || len(n.strings) > internStrings {
		t.Errorf("interner holds %d label sets and %d strings, want at most %d and %d", len(n.sets), len(n.strings), internLabelSets, internStrings)
	}
	if got := n.string("x"); got != "x" {
		t.Errorf("string(%q) = %q", "x", got)
	}
}
