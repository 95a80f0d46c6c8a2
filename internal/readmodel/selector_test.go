package readmodel

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func newSelectorLock(ns, name string, s lockv1alpha1.LockSelector) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec:       lockv1alpha1.LockSpec{Selector: &s},
	}
}

// TestLockIndexSelectors: the index gives an object its targetRef Locks and
// the selector Locks of its namespace that cover it (Lock.Covers); invalid
// selector Locks are in no index; selector Locks count once among all
// live Locks and are found by the kinds they could cover.
func TestLockIndexSelectors(t *testing.T) {
	db := map[string]string{"tier": "db"}
	src := &lockSource{watcher: watch.NewFake(), locks: []lockv1alpha1.Lock{
		*newLock("forge", "ref", "", "Stack", "forge"),
		*newSelectorLock("forge", "all", lockv1alpha1.LockSelector{}),
		*newSelectorLock("forge", "db", lockv1alpha1.LockSelector{MatchLabels: db}),
		*newSelectorLock("forge", "gateways", lockv1alpha1.LockSelector{Kinds: []string{"Gateway", "Route"}}),
		*newSelectorLock("forge", "bad", lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Equals"}}}),
		*newSelectorLock("elsewhere", "all", lockv1alpha1.LockSelector{}),
	}}
	index := startIndex(t, src)
	names := func(locks []lockv1alpha1.Lock, err error) []string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, l := range locks {
			out = append(out, l.Namespace+"/"+l.Name)
		}
		slices.Sort(out)
		return out
	}
	forge := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge", Labels: db}
	if diff := cmp.Diff([]string{"forge/all", "forge/db", "forge/ref"}, names(index.LiveLocksCovering(forge))); diff != "" {
		t.Errorf("LiveLocksCovering(labelled forge): -want, +got:\n%s", diff)
	}
	// The reconciler's read (its targetRef Locks read first, their
	// statuses its to write) gives the same Locks, and leaves its own
	// slice as it was.
	refs, err := index.LiveLocks(forge.Key())
	if err != nil {
		t.Fatal(err)
	}
	spare := make([]lockv1alpha1.Lock, len(refs), len(refs)+4) // room it must not write into
	copy(spare, refs)
	if diff := cmp.Diff(names(index.LiveLocksCovering(forge)), names(index.LiveLocksCoveringWith(forge, spare))); diff != "" {
		t.Errorf("LiveLocksCoveringWith(labelled forge, its targetRef Locks) against LiveLocksCovering: -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/", "forge/ref"}, names(spare[:len(refs)+1], nil)); diff != "" {
		t.Errorf("LiveLocksCoveringWith wrote into the room of the targetRef Locks it was given: -want, +got:\n%s", diff)
	}
	forge.Labels = map[string]string{"tier": "web"}
	if diff := cmp.Diff([]string{"forge/all", "forge/ref"}, names(index.LiveLocksCovering(forge))); diff != "" {
		t.Errorf("LiveLocksCovering(relabelled forge): -want, +got:\n%s", diff)
	}
	web := forge
	forge.Labels = db
	gateway := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Gateway", Name: "g"}
	lock := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Lock", Name: "ref"}
	each, err := index.LiveSelectorLocksCovering("forge", []lockv1alpha1.Object{forge, web, gateway, lock})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{{"forge/all", "forge/db"}, {"forge/all"}, {"forge/all", "forge/gateways"}, {}} {
		if diff := cmp.Diff(want, names(each[i], nil)); diff != "" {
			t.Errorf("LiveSelectorLocksCovering(forge, ...)[%d]: -want, +got:\n%s", i, diff)
		}
	}
	if diff := cmp.Diff([]string{"forge/all", "forge/db", "forge/gateways"}, names(index.LiveSelectorLocksIn("forge"))); diff != "" {
		t.Errorf("LiveSelectorLocksIn(forge): -want, +got:\n%s", diff)
	}
	gatewayGK := schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Gateway"}
	if diff := cmp.Diff([]string{"elsewhere/all", "forge/all", "forge/db", "forge/gateways"}, names(index.LiveSelectorLocksOfKind(gatewayGK))); diff != "" {
		t.Errorf("LiveSelectorLocksOfKind(Gateway): -want, +got:\n%s", diff)
	}
	stack := schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}
	if diff := cmp.Diff([]string{"elsewhere/all", "forge/all", "forge/db"}, names(index.LiveSelectorLocksOfKind(stack))); diff != "" {
		t.Errorf("LiveSelectorLocksOfKind(Stack): -want, +got:\n%s", diff)
	}
	if diff := cmp.Diff([]string{"forge/ref"}, names(index.LiveLocksOfKind(stack))); diff != "" {
		t.Errorf("LiveLocksOfKind(Stack) lists targetRef Locks only: -want, +got:\n%s", diff)
	}
	if _, total, err := index.AnyLiveLocks(0); err != nil || total != 5 {
		t.Errorf("AnyLiveLocks(0) total %d, %v; want 5 (each selector Lock once, the invalid one not)", total, err)
	}
}

// TestSelectorLocksCovering: the names of the live selector Locks that
// cover an object with any of its labels (a relabelling's old and new),
// never a targetRef Lock, an invalid one or another namespace's.
func TestSelectorLocksCovering(t *testing.T) {
	src := &lockSource{watcher: watch.NewFake(), locks: []lockv1alpha1.Lock{
		*newLock("forge", "ref", "", "Stack", "forge"),
		*newSelectorLock("forge", "db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}),
		*newSelectorLock("forge", "web", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "web"}}),
		*newSelectorLock("forge", "gateways", lockv1alpha1.LockSelector{Kinds: []string{"Gateway"}}),
		*newSelectorLock("forge", "bad", lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Equals"}}}),
		*newSelectorLock("elsewhere", "all", lockv1alpha1.LockSelector{}),
	}}
	index := startIndex(t, src)
	object := func(tier string) lockv1alpha1.Object {
		return lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge", Labels: map[string]string{"tier": tier}}
	}
	for name, tc := range map[string]struct {
		objs []lockv1alpha1.Object
		want []string
	}{
		"labelled":   {[]lockv1alpha1.Object{object("db")}, []string{"forge/db"}},
		"relabelled": {[]lockv1alpha1.Object{object("db"), object("web")}, []string{"forge/db", "forge/web"}},
		"none":       {[]lockv1alpha1.Object{object("cache")}, nil},
		"nothing":    {nil, nil},
	} {
		var got []string
		for _, k := range index.SelectorLocksCovering(tc.objs...) {
			got = append(got, k.String())
		}
		slices.Sort(got)
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s: SelectorLocksCovering(...): -want, +got:\n%s", name, diff)
		}
	}
}
