package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestProtectedListKeepsTheFirstNames: every resource is counted, and the
// first MaxProtectedNames by kind and name are kept, whatever the order
// they come in.
func TestProtectedListKeepsTheFirstNames(t *testing.T) {
	var list protectedList
	for i := 24; i >= 0; i-- {
		list.add(lockv1alpha1.ProtectedResource{Kind: "Stack", Name: fmt.Sprintf("s%02d", i)})
		if i < 3 {
			list.add(lockv1alpha1.ProtectedResource{Kind: "Gateway", Name: fmt.Sprintf("g%02d", i)})
		}
	}
	want := &lockv1alpha1.ProtectedStatus{Count: 28}
	for i := range 3 {
		want.Resources = append(want.Resources, lockv1alpha1.ProtectedResource{Kind: "Gateway", Name: fmt.Sprintf("g%02d", i)})
	}
	for i := range 7 {
		want.Resources = append(want.Resources, lockv1alpha1.ProtectedResource{Kind: "Stack", Name: fmt.Sprintf("s%02d", i)})
	}
	if diff := cmp.Diff(want, list.status()); diff != "" {
		t.Errorf("25 Stacks and 3 Gateways, last first: -want, +got:\n%s", diff)
	}
}

// TestStatusPatch: the whole status at a resourceVersion; no names of
// covered resources is an explicit null (a merge patch would otherwise
// keep the old ones), and a status without lastDenied leaves it out, so
// that it is never erased.
func TestStatusPatch(t *testing.T) {
	for name, tc := range map[string]struct {
		reason string
		status lockv1alpha1.LockStatus
		want   string
	}{
		"covers nothing": {
			reason: "resources null",
			status: lockv1alpha1.LockStatus{Protected: protectedNone()},
			want:   `{"metadata":{"resourceVersion":"7"},"status":{"active":false,"protected":{"count":0,"resources":null}}}`,
		},
		"covers its target": {
			reason: "the target named",
			status: lockv1alpha1.LockStatus{Active: true, Protected: protectedTarget(lockv1alpha1.TargetKey{Namespace: "a", Group: lockv1alpha1.Group, Kind: "Stack", Name: "web"})},
			want:   `{"metadata":{"resourceVersion":"7"},"status":{"active":true,"protected":{"count":1,"resources":[{"kind":"Stack","name":"web"}]}}}`,
		},
	} {
		data, err := statusPatch("7", tc.status).Data(nil)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, string(data)); diff != "" {
			t.Errorf("%s: %s\nstatusPatch(...): -want, +got:\n%s", name, tc.reason, diff)
		}
	}
}

// TestLabelsEqual: a relabelling is any change of key or value.
func TestLabelsEqual(t *testing.T) {
	for name, tc := range map[string]struct {
		a, b map[string]string
		want bool
	}{
		"both empty":    {nil, map[string]string{}, true},
		"same":          {map[string]string{"tier": "db"}, map[string]string{"tier": "db"}, true},
		"value changed": {map[string]string{"tier": "db"}, map[string]string{"tier": "web"}, false},
		"key added":     {map[string]string{"tier": "db"}, map[string]string{"tier": "db", "x": ""}, false},
		"key renamed":   {map[string]string{"tier": "db"}, map[string]string{"tie": "db"}, false},
	} {
		if got := labelsEqual(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: labelsEqual(%v, %v) = %t, want %t", name, tc.a, tc.b, got, tc.want)
		}
	}
}
