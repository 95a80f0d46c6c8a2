package v1alpha1

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// optInForTest opts gks in for one test, and restores the list after it.
func optInForTest(t *testing.T, gks ...schema.GroupKind) {
	t.Helper()
	before := OptedIn()
	if err := SetOptedIn(gks); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := SetOptedIn(before); err != nil {
			t.Error(err)
		}
	})
}

var (
	pvcKind    = schema.GroupKind{Kind: "PersistentVolumeClaim"}
	secretKind = schema.GroupKind{Kind: "Secret"}
)

// TestOptedInKinds checks docs/contract.md rule 21 in the rule's code: an
// opted-in kind is protectable, by targetRef and by a selector that names
// it, never by a selector without kinds; other kinds of its group are not.
func TestOptedInKinds(t *testing.T) {
	if err := Protectable(pvcKind); err == nil {
		t.Fatal("a PersistentVolumeClaim is protectable before any opt-in")
	}
	optInForTest(t, pvcKind, secretKind)
	for gk, want := range map[schema.GroupKind]bool{pvcKind: true, secretKind: true, {Kind: "ConfigMap"}: false, {Group: "apps", Kind: "Secret"}: false} {
		if got := Protectable(gk) == nil; got != want {
			t.Errorf("Protectable(%s): got %v, want %v", gk, got, want)
		}
	}
	now := time.Now()
	pvc := Object{Namespace: "ns", Kind: "PersistentVolumeClaim", Name: "data", Labels: map[string]string{"tier": "db"}}

	byRef := newLock("ns", "l", "v1", "PersistentVolumeClaim", "data")
	if key, err := byRef.Target(); err != nil || key != pvc.Key() {
		t.Errorf("Target: got %v, %v; want %v", key, err, pvc.Key())
	}
	if !byRef.Covers(pvc, now) {
		t.Error("a targetRef Lock does not cover its opted-in target")
	}

	named := selectorLock("ns", "sel", LockSelector{MatchLabels: map[string]string{"tier": "db"}, Kinds: []string{"PersistentVolumeClaim"}})
	if !named.Covers(pvc, now) || !named.CoversKind(pvcKind, now) {
		t.Error("a selector naming PersistentVolumeClaim does not cover the PVC")
	}
	unnamed := selectorLock("ns", "sel", LockSelector{MatchLabels: map[string]string{"tier": "db"}})
	if unnamed.Covers(pvc, now) || unnamed.CoversKind(pvcKind, now) {
		t.Error("a selector without kinds covers an opted-in kind")
	}
	if all := selectorLock("ns", "sel", LockSelector{}); all.Covers(pvc, now) {
		t.Error("an empty selector covers an opted-in kind")
	}
	if got := SelectorKind("Secret"); got != secretKind {
		t.Errorf("SelectorKind(Secret): got %s", got)
	}
	if got := SelectorKind("Stack"); got != (schema.GroupKind{Group: Group, Kind: "Stack"}) {
		t.Errorf("SelectorKind(Stack): got %s", got)
	}
}

// TestSetOptedInRefuses checks the kinds SetOptedIn refuses: the group's
// own, and two kinds spelled alike.
func TestSetOptedInRefuses(t *testing.T) {
	optInForTest(t)
	for _, gks := range [][]schema.GroupKind{
		{{Group: Group, Kind: "Stack"}},
		{secretKind, {Group: "example.com", Kind: "Secret"}},
		{{Group: "apps"}},
	} {
		if err := SetOptedIn(gks); err == nil {
			t.Errorf("SetOptedIn(%v): no error", gks)
		}
	}
}

// TestSelectorOptedInKinds: a selector Lock's opted-in kinds are those its
// kinds name (each once, in their order), none for kinds of the group, an
// empty kinds list, a targetRef Lock or a Lock expired.
func TestSelectorOptedInKinds(t *testing.T) {
	optInForTest(t, pvcKind, secretKind)
	now := time.Now()
	mixed := selectorLock("ns", "sel", LockSelector{Kinds: []string{"Stack", "Secret", "PersistentVolumeClaim"}})
	expired := mixed.DeepCopy()
	expired.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Second)}
	for name, tc := range map[string]struct {
		l    *Lock
		want []schema.GroupKind
	}{
		"Mixed":     {l: mixed, want: []schema.GroupKind{secretKind, pvcKind}},
		"GroupOnly": {l: selectorLock("ns", "sel", LockSelector{Kinds: []string{"Stack"}})},
		"NoKinds":   {l: selectorLock("ns", "sel", LockSelector{MatchLabels: map[string]string{"tier": "db"}})},
		"TargetRef": {l: newLock("ns", "l", "v1", "PersistentVolumeClaim", "data")},
		"Expired":   {l: expired},
	} {
		if got := tc.l.SelectorOptedInKinds(now); !slices.Equal(got, tc.want) {
			t.Errorf("%s: SelectorOptedInKinds: got %v, want %v", name, got, tc.want)
		}
	}
}
