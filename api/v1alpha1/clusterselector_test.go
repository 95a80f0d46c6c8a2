package v1alpha1

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestClusterLockSelector: a selector ClusterLock covers the
// cluster-scoped objects of its kinds whose labels match, by group and
// kind (docs/contract.md rule 22); a selector that requires no label, names
// ClusterLock or no kind is invalid and covers nothing; Target says it has
// no targetRef; AsLock carries the selector.
func TestClusterLockSelector(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	cl := func(s ClusterLockSelector) *ClusterLock {
		return &ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "keep"}, Spec: ClusterLockSpec{Selector: &s}}
	}
	prod := map[string]string{"tier": "prod"}
	ns := cl(ClusterLockSelector{Kinds: []string{"Namespace", "ClusterRole", "Widget"}, MatchLabels: prod})
	cases := map[string]struct {
		o    Object
		want bool
	}{
		"namespace, labels match":      {Object{Kind: "Namespace", Name: "a", Labels: prod}, true},
		"cluster role, labels match":   {Object{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "a", Labels: prod}, true},
		"group kind, labels match":     {Object{Group: Group, Kind: "Widget", Name: "a", Labels: prod}, true},
		"labels differ":                {Object{Kind: "Namespace", Name: "a", Labels: map[string]string{"tier": "dev"}}, false},
		"kind not named":               {Object{Group: "storage.k8s.io", Kind: "StorageClass", Name: "a", Labels: prod}, false},
		"kind named, another group":    {Object{Group: "example.com", Kind: "ClusterRole", Name: "a", Labels: prod}, false},
		"namespaced object, same kind": {Object{Namespace: "x", Group: Group, Kind: "Widget", Name: "a", Labels: prod}, false},
	}
	for name, tc := range cases {
		if got := ns.Covers(now, tc.o); got != tc.want {
			t.Errorf("%s: Covers = %t, want %t", name, got, tc.want)
		}
		read := tc.o
		read.Labels, read.LabelReader = map[string]string{"tier": "not-read"}, LabelMap(tc.o.Labels)
		if got := ns.Covers(now, read); got != tc.want {
			t.Errorf("%s: Covers of the labels through a LabelReader = %t, want %t", name, got, tc.want)
		}
	}
	if _, err := ns.Target(); err != ErrClusterSelector {
		t.Errorf("Target() error %v, want ErrClusterSelector", err)
	}
	if l := ns.AsLock(); l.Spec.Selector == nil || l.ScopeString() != "selector:tier=prod;kinds=Namespace,ClusterRole,Widget" {
		t.Errorf("AsLock's scope %q", l.ScopeString())
	}
	if got := ClusterKind("CustomResourceDefinition"); got != (schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}) {
		t.Errorf("ClusterKind = %v", got)
	}
	invalid := map[string]struct {
		s    ClusterLockSelector
		says string
	}{
		"no kind":           {ClusterLockSelector{MatchLabels: prod}, "selector.kinds is empty"},
		"requires no label": {ClusterLockSelector{Kinds: []string{"Namespace"}, MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: SelectorOpDoesNotExist}}}, "requires no label"},
		"empty":             {ClusterLockSelector{Kinds: []string{"Namespace"}}, "requires no label"},
		"ClusterLock":       {ClusterLockSelector{Kinds: []string{"ClusterLock"}, MatchLabels: prod}, ErrClusterLockTarget.Error()},
		"bad label value":   {ClusterLockSelector{Kinds: []string{"Namespace"}, MatchLabels: map[string]string{"tier": "a b"}}, "not a valid label selector"},
	}
	for name, tc := range invalid {
		c := cl(tc.s)
		if err := c.Scope(); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: Scope() = %v, want %q", name, err, tc.says)
		}
		if c.Live(now) || c.Covers(now, Object{Kind: "Namespace", Name: "a", Labels: prod}) {
			t.Errorf("%s: an invalid selector ClusterLock is live or covers", name)
		}
	}
	exists := cl(ClusterLockSelector{Kinds: []string{"Namespace"}, MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: SelectorOpExists}}})
	if !exists.Covers(now, Object{Kind: "Namespace", Name: "a", Labels: prod}) || exists.Covers(now, Object{Kind: "Namespace", Name: "a"}) {
		t.Error("an Exists selector covers by the label's presence")
	}
}
