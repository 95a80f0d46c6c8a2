package readmodel

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestCachedSelectorDecides checks, for random selectors and objects,
// that the selector a CachedLock's decisions read (its matchLabels as In
// requirements) decides as the Lock's own does: the objects it selects
// and covers, its validity, whether it is empty, its coverage keys, the
// kinds it could cover and its Ready message; and that selector gives the
// Lock's own back, in form too (nil or empty).
func TestCachedSelectorDecides(t *testing.T) {
	keys := []string{"app", "tier", "core.navique.com/x", "bad key!"}
	values := []string{"", "a", "b", "forge", "bad value!"}
	kinds := []string{"Stack", "Database"}
	ops := []string{lockv1alpha1.SelectorOpIn, lockv1alpha1.SelectorOpNotIn, lockv1alpha1.SelectorOpExists, lockv1alpha1.SelectorOpDoesNotExist, "Bogus"}
	rng := rand.New(rand.NewPCG(38, 25))
	pick := func(from []string) string { return from[rng.IntN(len(from))] }
	now := time.Now()
	for i := range 2000 {
		s := &lockv1alpha1.LockSelector{}
		if n := rng.IntN(4); n > 0 || rng.IntN(2) == 0 {
			s.MatchLabels = map[string]string{}
			for range n {
				s.MatchLabels[pick(keys)] = pick(values)
			}
		}
		if n := rng.IntN(3); n > 0 || rng.IntN(2) == 0 {
			s.MatchExpressions = []lockv1alpha1.LabelSelectorRequirement{}
			for range n {
				r := lockv1alpha1.LabelSelectorRequirement{Key: pick(keys), Operator: pick(ops)}
				for range rng.IntN(3) {
					r.Values = append(r.Values, pick(values))
				}
				s.MatchExpressions = append(s.MatchExpressions, r)
			}
		}
		if rng.IntN(3) == 0 {
			s.Kinds = []string{pick(kinds)}
		}
		own := s.DeepCopy()
		c := newCachedSelector(s)
		got := c.selector()
		if diff := cmp.Diff(own, got); diff != "" || !reflect.DeepEqual(own, got) {
			t.Fatalf("case %d: selector() is not the Lock's own, -want +got:\n%s\n%#v\n%#v", i, diff, own, got)
		}
		d := c.decided()
		if (own.Validate() == nil) != (d.Validate() == nil) || own.IsEmpty() != d.IsEmpty() {
			t.Fatalf("case %d: valid %v, empty %v; decided valid %v, empty %v (%#v)", i, own.Validate(), own.IsEmpty(), d.Validate(), d.IsEmpty(), own)
		}
		if own.Validate() == nil && !slices.Equal(coverageKeys("ns", own), coverageKeys("ns", d)) {
			t.Fatalf("case %d: coverage keys %q, decided %q (%#v)", i, coverageKeys("ns", own), coverageKeys("ns", d), own)
		}
		lock := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "ns"}, Spec: lockv1alpha1.LockSpec{Selector: own, Reason: "r"}}
		cached := lock
		cached.Spec.Selector = d
		if lock.ActiveMessage() != cached.ActiveMessage() {
			t.Fatalf("case %d: Ready message %q, decided %q", i, lock.ActiveMessage(), cached.ActiveMessage())
		}
		for _, kind := range kinds {
			gk := schema.GroupKind{Group: lockv1alpha1.Group, Kind: kind}
			if lock.CoversKind(gk, now) != cached.CoversKind(gk, now) {
				t.Fatalf("case %d: CoversKind(%s) %v, decided %v", i, kind, lock.CoversKind(gk, now), cached.CoversKind(gk, now))
			}
		}
		for range 20 {
			o := lockv1alpha1.Object{Namespace: "ns", Group: lockv1alpha1.Group, Kind: pick(kinds), Name: "o", Labels: map[string]string{}}
			for range rng.IntN(4) {
				o.Labels[pick(keys)] = pick(values)
			}
			if own.Matches(o.Kind, o.Labels) != d.Matches(o.Kind, o.Labels) || lock.Covers(o, now) != cached.Covers(o, now) {
				t.Fatalf("case %d: %#v matches %v, covers %v; decided %v, %v (%#v)", i, o, own.Matches(o.Kind, o.Labels), lock.Covers(o, now), d.Matches(o.Kind, o.Labels), cached.Covers(o, now), own)
			}
		}
	}
	if newCachedSelector(nil) != nil || (*cachedSelector)(nil).decided() != nil || (*cachedSelector)(nil).selector() != nil {
		t.Error("a Lock without a selector has one in the cache")
	}
}
