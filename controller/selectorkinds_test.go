package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// TestSelectorKinds: a selector Lock whose kinds are all served as
// written, for namespaced resources, is not held back; one that names a
// kind otherwise gets an InvalidTarget message naming each such kind, with
// the targetRef path's "did you mean", and is checked again when an
// install could fix it. And by construction (docs/contract.md rule 13):
// the Lock is let be active exactly when a DELETE of each of its kinds, as
// the API server sends it (a served, namespaced Kind), can match its
// selector.
func TestSelectorKinds(t *testing.T) {
	table := readmodel.NewKinds(fakeGroup())
	served, err := table.Refresh()
	if err != nil {
		t.Fatal(err)
	}
	const fix = "; the selector cannot be changed: create a Lock whose kinds are spelled as kubectl api-resources --api-group=core.navique.com lists them, then delete this one)"
	const inactive = " (this Lock is not active while one of its kinds is not served as written"
	const rest = ", though the resources of its other kinds that it matches stay protected: status.protected"
	cases := map[string]struct {
		reason  string
		kinds   []string
		want    string
		recheck time.Duration
	}{
		"None":   {reason: "no kinds: every kind of the group, nothing to resolve"},
		"Served": {reason: "the served spelling", kinds: []string{"Stack"}},
		"Plural": {reason: "the issue's typo: InvalidTarget, with the targetRef path's suggestion", kinds: []string{"Stacks"},
			want: `selector.kinds: core.navique.com serves no kind "Stacks"; did you mean Stack?` + inactive + fix, recheck: unservedKindRecheck},
		"NotServed": {reason: "a kind the group does not serve (another group's, or not installed): InvalidTarget, checked again", kinds: []string{"Gateway"},
			want: `selector.kinds: core.navique.com serves no kind "Gateway" (is its CustomResourceDefinition installed? kubectl api-resources --api-group=core.navique.com lists the kinds served)` +
				inactive + fix, recheck: unservedKindRecheck},
		"ClusterScoped": {reason: "a cluster-scoped kind: no install fixes it", kinds: []string{"Region"},
			want: "selector.kinds: Region.core.navique.com is cluster-scoped; a Lock protects resources in its own namespace" + inactive + fix},
		"Mixed": {reason: "one good kind, two bad: the whole Lock is InvalidTarget, and says that the good kind stays protected", kinds: []string{"Stack", "STK", "Region"},
			want: `selector.kinds: core.navique.com serves no kind "STK"; did you mean Stack?; Region.core.navique.com is cluster-scoped; a Lock protects resources in its own namespace` +
				inactive + rest + fix, recheck: unservedKindRecheck},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}, Kinds: tc.kinds}
			got, recheck, err := selectorKinds(table, s)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || recheck != tc.recheck {
				t.Errorf("%s\nselectorKinds(%v): recheck %v, want %v; message -want, +got:\n%s", tc.reason, tc.kinds, recheck, tc.recheck, diff)
			}
			// Every kind must be one a DELETE can carry and match.
			deletable := true
			for _, k := range tc.kinds {
				deletable = deletable && slices.ContainsFunc(served, func(sk readmodel.ServedKind) bool {
					return sk.Namespaced && sk.GVK.Kind == k && s.Matches(sk.GVK.Kind, map[string]string{"tier": "db"})
				})
			}
			if (got == "") != deletable {
				t.Errorf("selectorKinds(%v): not held back %t, but every kind matches a served kind's DELETE: %t", tc.kinds, got == "", deletable)
			}
		})
	}
}
