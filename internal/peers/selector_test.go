package peers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestSelectorLockMarker: a pending selector Lock makes every object of its
// namespace confirmed with the API server (docs/contract.md rule 15: the same
// strictness right after the create as a targetRef Lock), none elsewhere,
// until its Lock is delivered.
func TestSelectorLockMarker(t *testing.T) {
	_, cache, tr := warmStandalone(t)
	l := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "all", UID: "s1"},
		Spec:       lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}},
	}
	a, ok := AnnouncementOf(l)
	if !ok {
		t.Fatal("AnnouncementOf(a live selector Lock) = false")
	}
	if err := a.validate(); err != nil {
		t.Fatalf("a selector Lock's announcement does not validate: %v", err)
	}
	tr.Mark(a)
	for _, target := range []string{"a", "b"} {
		if reason, may := tr.MayLack(key(target)); !may || reason != ReasonMarker {
			t.Errorf("MayLack(%s) = %q, %v with a pending selector Lock in its namespace; want marker, true", target, reason, may)
		}
	}
	other := lockv1alpha1.TargetKey{Namespace: "other", Group: lockv1alpha1.Group, Kind: "Stack", Name: "a"}
	if _, may := tr.MayLack(other); may {
		t.Error("a pending selector Lock must not make another namespace's deletes confirmed")
	}
	if !tr.PendingIn("ns") {
		t.Error("PendingIn(ns) = false with a pending selector Lock")
	}
	cache.uids[types.UID("s1")] = true
	tr.Observe("s1")
	if _, may := tr.MayLack(key("a")); may {
		t.Error("the selector Lock was delivered: MayLack(a) must be false")
	}

	bad := l.DeepCopy()
	bad.Spec.Selector.MatchExpressions = []lockv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Equals"}}
	if _, ok := AnnouncementOf(bad); ok {
		t.Error("AnnouncementOf(a selector Lock that protects nothing) = true")
	}
}
