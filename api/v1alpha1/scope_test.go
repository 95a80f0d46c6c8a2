package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func selectorLock(ns, name string, s LockSelector) *Lock {
	return &Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       LockSpec{Selector: &s},
	}
}

func stack(ns, name string, lbls map[string]string) Object {
	return Object{Namespace: ns, Group: Group, Kind: "Stack", Name: name, Labels: lbls}
}

func TestCovers(t *testing.T) {
	db := map[string]string{"tier": "db"}
	deleting := selectorLock("ns", "l", LockSelector{})
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	cases := map[string]struct {
		reason        string
		lock          *Lock
		obj           Object
		covers        bool
		coversNS      bool
		live          bool
		coversKindErr bool
	}{
		"TargetRef": {
			reason: "A targetRef Lock covers its target, whatever its labels.",
			lock:   newLock("ns", "l", "", "Stack", "s"),
			obj:    stack("ns", "s", db),
			covers: true, live: true,
		},
		"TargetRefOtherName": {
			reason: "A targetRef Lock covers no other name.",
			lock:   newLock("ns", "l", "", "Stack", "s"),
			obj:    stack("ns", "t", nil),
			live:   true,
		},
		"TargetRefOtherVersion": {
			reason: "The version is not part of the match.",
			lock:   newLock("ns", "l", "core.navique.com/v1beta1", "Stack", "s"),
			obj:    stack("ns", "s", nil),
			covers: true, live: true,
		},
		"Empty": {
			reason: "An empty selector covers every object of the namespace, and the namespace.",
			lock:   selectorLock("ns", "l", LockSelector{}),
			obj:    stack("ns", "anything", nil),
			covers: true, coversNS: true, live: true,
		},
		"EmptyOtherNamespace": {
			reason:   "A Lock covers nothing outside its namespace.",
			lock:     selectorLock("ns", "l", LockSelector{}),
			obj:      stack("other", "s", nil),
			coversNS: true, live: true,
		},
		"EmptyOtherGroup": {
			reason:   "Only core.navique.com objects are covered.",
			lock:     selectorLock("ns", "l", LockSelector{}),
			obj:      Object{Namespace: "ns", Group: "apps", Kind: "Deployment", Name: "d"},
			coversNS: true, live: true,
		},
		"EmptyLock": {
			reason:   "A Lock is never covered: deleting a Lock is never blocked.",
			lock:     selectorLock("ns", "l", LockSelector{}),
			obj:      Object{Namespace: "ns", Group: Group, Kind: "Lock", Name: "other"},
			coversNS: true, live: true,
		},
		"MatchLabels": {
			reason: "tier=db covers an object labelled tier=db.",
			lock:   selectorLock("ns", "l", LockSelector{MatchLabels: db}),
			obj:    stack("ns", "s", map[string]string{"tier": "db", "x": "y"}),
			covers: true, live: true,
		},
		"MatchLabelsRelabelled": {
			reason: "tier=db does not cover tier=web.",
			lock:   selectorLock("ns", "l", LockSelector{MatchLabels: db}),
			obj:    stack("ns", "s", map[string]string{"tier": "web"}),
			live:   true,
		},
		"MatchLabelsUnlabelled": {
			reason: "tier=db does not cover an unlabelled object.",
			lock:   selectorLock("ns", "l", LockSelector{MatchLabels: db}),
			obj:    stack("ns", "s", nil),
			live:   true,
		},
		"Kinds": {
			reason: "kinds limits the kinds; a non-empty selector never covers the namespace.",
			lock:   selectorLock("ns", "l", LockSelector{Kinds: []string{"PostgresCluster"}}),
			obj:    stack("ns", "s", nil),
			live:   true,
		},
		"KindsMatch": {
			reason: "kinds includes Stack.",
			lock:   selectorLock("ns", "l", LockSelector{Kinds: []string{"Gateway", "Stack"}}),
			obj:    stack("ns", "s", nil),
			covers: true, live: true,
		},
		"NotIn": {
			reason: "NotIn covers an object without the label.",
			lock: selectorLock("ns", "l", LockSelector{MatchExpressions: []LabelSelectorRequirement{
				{Key: "tier", Operator: SelectorOpNotIn, Values: []string{"web"}}}}),
			obj:    stack("ns", "s", nil),
			covers: true, live: true,
		},
		"BadOperator": {
			reason: "A selector that does not parse covers nothing and is not live.",
			lock: selectorLock("ns", "l", LockSelector{MatchExpressions: []LabelSelectorRequirement{
				{Key: "tier", Operator: "Equals", Values: []string{"db"}}}}),
			obj:           stack("ns", "s", db),
			coversKindErr: true,
		},
		"InWithoutValues": {
			reason:        "In needs values: not live, never everything.",
			lock:          selectorLock("ns", "l", LockSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: SelectorOpIn}}}),
			obj:           stack("ns", "s", db),
			coversKindErr: true,
		},
		"BadKey": {
			reason:        "A label key that is not one is invalid.",
			lock:          selectorLock("ns", "l", LockSelector{MatchLabels: map[string]string{"not a key": "x"}}),
			obj:           stack("ns", "s", map[string]string{"not a key": "x"}),
			coversKindErr: true,
		},
		"LockKind": {
			reason:        "kinds: [Lock] can never protect anything.",
			lock:          selectorLock("ns", "l", LockSelector{Kinds: []string{"Lock"}}),
			obj:           Object{Namespace: "ns", Group: Group, Kind: "Lock", Name: "x"},
			coversKindErr: true,
		},
		"BeingDeleted": {
			reason:        "A selector Lock being deleted no longer counts.",
			lock:          deleting,
			obj:           stack("ns", "s", nil),
			coversKindErr: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := tc.lock.Covers(tc.obj, time.Time{}); got != tc.covers {
				t.Errorf("%s\nCovers(%+v) = %v, want %v", tc.reason, tc.obj, got, tc.covers)
			}
			if got := tc.lock.CoversNamespace(time.Time{}); got != tc.coversNS {
				t.Errorf("%s\nCoversNamespace() = %v, want %v", tc.reason, got, tc.coversNS)
			}
			if got := tc.lock.Live(time.Time{}); got != tc.live && name != "BeingDeleted" {
				t.Errorf("%s\nLive() = %v, want %v", tc.reason, got, tc.live)
			}
			if tc.covers && !tc.lock.CoversKind(schema.GroupKind{Group: tc.obj.Group, Kind: tc.obj.Kind}, time.Time{}) {
				t.Errorf("%s\nCoversKind(%s) = false for a Lock that covers an object of it", tc.reason, tc.obj.Kind)
			}
			if tc.coversKindErr && tc.lock.CoversKind(schema.GroupKind{Group: Group, Kind: "Stack"}, time.Time{}) {
				t.Errorf("%s\nCoversKind(Stack) = true for a Lock that is not live", tc.reason)
			}
			if tc.lock.Live(time.Time{}) && tc.lock.Selects(tc.obj) != tc.covers {
				t.Errorf("%s\nSelects(%+v) = %v for a live Lock, want Covers' %v", tc.reason, tc.obj, !tc.covers, tc.covers)
			}
			// The same labels read through a LabelReader (a cached
			// object's, which keeps no map) decide alike; the reader, not
			// Labels, is read.
			read := tc.obj
			read.Labels, read.LabelReader = map[string]string{"tier": "not-read"}, LabelMap(tc.obj.Labels)
			if got := tc.lock.Covers(read, time.Time{}); got != tc.covers {
				t.Errorf("%s\nCovers of the labels through a LabelReader = %v, want %v", tc.reason, got, tc.covers)
			}
		})
	}
}

// TestScopeErrors: an invalid scope says why, and a selector Lock has no
// target.
func TestScopeErrors(t *testing.T) {
	l := selectorLock("ns", "l", LockSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "tier", Operator: "Equals", Values: []string{"db"}}}})
	want := `selector is not a valid label selector: "Equals" is not a valid label selector operator`
	if err := l.Scope(); err == nil || err.Error() != want {
		t.Errorf("Scope() = %v, want %q", err, want)
	}
	if _, err := l.Target(); err != ErrNoTargetRef {
		t.Errorf("Target() of a selector Lock = %v, want ErrNoTargetRef", err)
	}
	if _, live := selectorLock("ns", "l", LockSelector{}).LiveTarget(time.Time{}); live {
		t.Error("LiveTarget() of a selector Lock is live; want false (it has no target)")
	}
}

// FuzzMatchesAgreesWithLabelSelector: LockSelector.Matches decides as the
// selector of metav1.LabelSelectorAsSelector does, for every selector that
// Validate accepts, and Validate accepts exactly what it parses.
func FuzzMatchesAgreesWithLabelSelector(f *testing.F) {
	f.Add("tier", "db", "tier", uint8(0), "db", "web", "tier", "db")
	f.Add("", "", "tier", uint8(1), "web", "", "tier", "db")
	f.Add("a", "b", "env", uint8(2), "", "", "env", "")
	f.Add("a", "b", "env", uint8(3), "", "", "x", "y")
	f.Add("a/b", "", "c", uint8(4), "x", "", "c", "x")
	f.Add("k", "v", "k", uint8(0), "", "", "k", "v")
	f.Fuzz(func(t *testing.T, mk, mv, ek string, op uint8, v1, v2, lk, lv string) {
		ops := []string{SelectorOpIn, SelectorOpNotIn, SelectorOpExists, SelectorOpDoesNotExist, "Equals"}
		s := &LockSelector{}
		if mk != "" {
			s.MatchLabels = map[string]string{mk: mv}
		}
		if ek != "" {
			r := LabelSelectorRequirement{Key: ek, Operator: ops[int(op)%len(ops)]}
			for _, v := range []string{v1, v2} {
				if v != "" {
					r.Values = append(r.Values, v)
				}
			}
			s.MatchExpressions = []LabelSelectorRequirement{r}
		}
		obj := map[string]string{}
		if lk != "" {
			obj[lk] = lv
		}
		sel, parseErr := metav1.LabelSelectorAsSelector(s.LabelSelector())
		validErr := s.Validate()
		if (parseErr == nil) != (validErr == nil) {
			t.Fatalf("Validate() = %v, LabelSelectorAsSelector error %v", validErr, parseErr)
		}
		if parseErr != nil {
			l := &Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "ns"}, Spec: LockSpec{Selector: s}}
			if l.Covers(Object{Namespace: "ns", Group: Group, Kind: "Stack", Name: "s", Labels: obj}, time.Time{}) {
				t.Fatalf("a Lock with the invalid selector %+v covers an object", s)
			}
			return
		}
		if got, want := s.Matches("Stack", obj), sel.Matches(labels.Set(obj)); got != want {
			t.Fatalf("Matches(%v) = %v, LabelSelectorAsSelector(%+v) %q says %v", obj, got, s, sel, want)
		}
	})
}

// TestScopeString: what status.scope, kubectl get locks and kubectl lock
// list say a Lock covers, for each kind of scope.
func TestScopeString(t *testing.T) {
	for _, tc := range []struct {
		spec LockSpec
		want string
	}{
		{LockSpec{TargetRef: TargetReference{Kind: "Stack", Name: "forge"}}, "Stack/forge"},
		{LockSpec{TargetRef: TargetReference{APIVersion: "core.navique.com/v1beta1", Kind: "Stack", Name: "forge"}}, "Stack/forge"},
		{LockSpec{TargetRef: TargetReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}}, "Deployment.apps/web"},
		{LockSpec{Selector: &LockSelector{}}, AllScope},
		{LockSpec{Selector: &LockSelector{MatchLabels: map[string]string{"tier": "db"}}}, "selector:tier=db"},
		{LockSpec{Selector: &LockSelector{MatchLabels: map[string]string{"app": "web"}, Kinds: []string{"Stack", "Database"}}}, "selector:app=web;kinds=Stack,Database"},
		{LockSpec{Selector: &LockSelector{MatchExpressions: []LabelSelectorRequirement{{Key: "env", Operator: SelectorOpNotIn, Values: []string{"dev"}}}}}, "selector:env notin (dev)"},
	} {
		l := &Lock{Spec: tc.spec}
		if got := l.ScopeString(); got != tc.want {
			t.Errorf("ScopeString() of %+v = %q, want %q", tc.spec, got, tc.want)
		}
	}
}
