package v1alpha1

import (
	"math/rand/v2"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSelectorTextAsKubernetes: a selector's text (String) and its
// validity (Validate) are what metav1.FormatLabelSelector and
// metav1.LabelSelectorAsSelector make of it, for selectors of labels
// alone (valid or not: keys with prefixes, empty values, bad characters,
// over-long names), with expressions and with kinds, and for 2,000
// random selectors of labels.
func TestSelectorTextAsKubernetes(t *testing.T) {
	cases := []LockSelector{
		{MatchLabels: map[string]string{"tier": "db"}},
		{MatchLabels: map[string]string{"tier": "db", "app": "pg", "a.b/c": "", "z": "1"}},
		{MatchLabels: map[string]string{"example.com/team": "a_b-c.d"}},
		{MatchLabels: map[string]string{"bad key": "x"}},
		{MatchLabels: map[string]string{"tier": "bad value"}},
		{MatchLabels: map[string]string{"/x": "y"}},
		{MatchLabels: map[string]string{strings.Repeat("k", 64): "v"}},
		{MatchLabels: map[string]string{"k": strings.Repeat("v", 64)}},
		{MatchLabels: map[string]string{"-k": "v"}},
		{MatchLabels: map[string]string{"k": "-v"}},
		{MatchLabels: map[string]string{"": "v"}},
		{MatchLabels: map[string]string{"tier": "db"}, Kinds: []string{"Stack"}},
		{Kinds: []string{"Stack"}},
		{MatchLabels: map[string]string{"tier": "db"}, MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: SelectorOpIn, Values: []string{"b", "a"}}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: SelectorOpExists}}},
		{MatchExpressions: []LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}},
	}
	rng := rand.New(rand.NewPCG(38, 32))
	// Mostly valid words, now and then a piece Kubernetes refuses.
	pieces := []string{"a", "Z", "0", "tier", "db", "a", "Z", "0", "tier", "db", "-", "_", ".", "/", " ", "é", "example.com/", strings.Repeat("x", 30)}
	word := func() string {
		var b strings.Builder
		for range rng.IntN(3) {
			n := 10
			if rng.IntN(12) == 0 {
				n = len(pieces)
			}
			b.WriteString(pieces[rng.IntN(n)])
		}
		return b.String()
	}
	for range 2000 {
		s := LockSelector{MatchLabels: map[string]string{}}
		for range 1 + rng.IntN(4) {
			s.MatchLabels[word()] = word()
		}
		cases = append(cases, s)
	}
	valid := 0
	for _, s := range cases {
		ls := s.LabelSelector()
		want := "selector:" + metav1.FormatLabelSelector(ls)
		if len(s.Kinds) > 0 {
			want += ";kinds=" + strings.Join(s.Kinds, ",")
		}
		if got := s.String(); got != want {
			t.Errorf("String() of %+v = %q, want %q", s, got, want)
		}
		_, kerr := metav1.LabelSelectorAsSelector(ls)
		err := s.Validate()
		if (err == nil) != (kerr == nil) {
			t.Errorf("Validate() of %+v = %v; Kubernetes says %v", s, err, kerr)
		}
		// The error names one bad key or value of the map, in its
		// iteration order: compared by its opening only.
		if kerr != nil && (err == nil || !strings.HasPrefix(err.Error(), "selector is not a valid label selector: ")) {
			t.Errorf("Validate() of %+v = %v, want Kubernetes' error %v", s, err, kerr)
		}
		if kerr == nil {
			valid++
		}
	}
	if valid < 100 || valid > len(cases)-100 {
		t.Errorf("%d of %d selectors valid: the random ones should try both", valid, len(cases))
	}
}

// BenchmarkSelectorText: a selector Lock's scope text and validation, as
// every pass of the reconciler asks them.
func BenchmarkSelectorText(b *testing.B) {
	s := &LockSelector{MatchLabels: map[string]string{"app": "pg", "tier": "db"}}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.String()
		_ = s.Validate()
	}
}
