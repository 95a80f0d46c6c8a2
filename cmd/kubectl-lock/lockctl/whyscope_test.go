package lockctl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// whyLocks are the Locks of namespace forge the why tests decide over.
func whyLocks() []lockv1alpha1.Lock {
	now := metav1.Now()
	sel := func(name string, s lockv1alpha1.LockSelector) lockv1alpha1.Lock {
		return lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name, Generation: 1}, Spec: lockv1alpha1.LockSpec{Selector: &s}}
	}
	ref := func(name, kind, target string) lockv1alpha1.Lock {
		return lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name, Generation: 1},
			Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: kind, Name: target}}}
	}
	inForce := func(l lockv1alpha1.Lock) lockv1alpha1.Lock {
		l.Spec.Level = lockv1alpha1.LevelReadOnly
		l.Status.ObservedGeneration = 1
		l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonInForce, Message: "every resource it covers is frozen", ObservedGeneration: 1}}
		return l
	}
	pending := func(l lockv1alpha1.Lock) lockv1alpha1.Lock {
		l.Spec.Level = lockv1alpha1.LevelReadOnly
		l.Status.ObservedGeneration = 1
		l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReadOnly, Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonPending, Message: "Stack/db is not labelled yet", ObservedGeneration: 1}}
		return l
	}
	deleting := sel("going", lockv1alpha1.LockSelector{})
	deleting.DeletionTimestamp = &now
	return []lockv1alpha1.Lock{
		sel("tier-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}),
		sel("web", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "web"}}),
		sel("gateways", lockv1alpha1.LockSelector{Kinds: []string{"Gateway"}}),
		pending(sel("not-legacy", lockv1alpha1.LockSelector{
			MatchLabels: map[string]string{"env": "prod"},
			MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{
				{Key: "legacy", Operator: lockv1alpha1.SelectorOpDoesNotExist},
				{Key: "tier", Operator: lockv1alpha1.SelectorOpIn, Values: []string{"cache", "db"}},
			},
		})),
		sel("everything", lockv1alpha1.LockSelector{}),
		deleting,
		inForce(ref("freeze-db", "Stack", "db")),
		ref("keep-db", "Stack", "db"),
		ref("keep-web", "Stack", "web"),
		sel("bad", lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}),
	}
}

// TestSelectorVerdicts: why shows every live selector Lock of the
// namespace with Lock.Covers' verdict on the resource, explained by each
// requirement against the resource's label.
func TestSelectorVerdicts(t *testing.T) {
	db := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "db", Labels: map[string]string{"tier": "db", "env": "prod"}}
	got := selectorVerdicts(whyLocks(), db)
	want := []whySelector{
		{Name: "everything", Selector: "<all>", Level: "CanNotDelete", Covers: true, Requirements: []whyRequirement{}},
		{Name: "gateways", Selector: "selector:<none>;kinds=Gateway", Level: "CanNotDelete", Requirements: []whyRequirement{
			{Requirement: "kind in (Gateway)", Label: "kind=Stack", key: "kind"},
		}},
		{Name: "not-legacy", Selector: "selector:env=prod,!legacy,tier in (cache,db)", Level: "ReadOnly", Covers: true, Requirements: []whyRequirement{
			{Requirement: "env=prod", Label: "env=prod", Met: true, key: "env"},
			{Requirement: "!legacy", Met: true, key: "legacy"},
			{Requirement: "tier in (cache,db)", Label: "tier=db", Met: true, key: "tier"},
		}},
		{Name: "tier-db", Selector: "selector:tier=db", Level: "CanNotDelete", Covers: true, Requirements: []whyRequirement{
			{Requirement: "tier=db", Label: "tier=db", Met: true, key: "tier"},
		}},
		{Name: "web", Selector: "selector:tier=web", Level: "CanNotDelete", Requirements: []whyRequirement{
			{Requirement: "tier=web", Label: "tier=db", key: "tier"},
		}},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(whyRequirement{})); diff != "" {
		t.Errorf("The live selector Locks (not the deleting or invalid ones), sorted, each with its requirements.\nselectorVerdicts(...): -want, +got:\n%s", diff)
	}
	for _, s := range got {
		met := true
		for _, r := range s.Requirements {
			met = met && r.Met
		}
		if met != s.Covers {
			t.Errorf("Lock %s: covers %v, but its requirements met: %v", s.Name, s.Covers, met)
		}
	}
}

// TestUpdateVerdict: an update is frozen under a live ReadOnly Lock that
// covers the resource (a targetRef or a selector Lock), in force when one
// of them says so; under none, lockguard never blocks it.
func TestUpdateVerdict(t *testing.T) {
	object := func(name string, lbls map[string]string) lockv1alpha1.Object {
		return lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: name, Labels: lbls}
	}
	cases := map[string]struct {
		reason string
		object lockv1alpha1.Object
		want   *whyUpdate
	}{
		"InForce": {
			reason: "Stack db is covered by freeze-db (in force) and not-legacy (pending): frozen, in force.",
			object: object("db", map[string]string{"tier": "db", "env": "prod"}),
			want: &whyUpdate{Frozen: true, InForce: true,
				Locks: []whyFreeze{
					{Name: "freeze-db", Scope: "Stack/db", Freeze: freezeInForce, Message: "every resource it covers is frozen"},
					{Name: "not-legacy", Scope: "selector:env=prod,!legacy,tier in (cache,db)", Freeze: freezePending, Message: "Stack/db is not labelled yet"},
				},
				Message: "ReadOnly Lock(s) [freeze-db not-legacy] cover it and the freeze is in force ([freeze-db]): updates and patches of its spec and metadata are refused, " +
					"except by the principals the installation exempts (the navique operator's ServiceAccount by default); its status subresource stays writable",
			},
		},
		"Pending": {
			reason: "Stack cache is covered by not-legacy alone, whose freeze is pending.",
			object: object("cache", map[string]string{"tier": "cache", "env": "prod"}),
			want: &whyUpdate{Frozen: true,
				Locks: []whyFreeze{{Name: "not-legacy", Scope: "selector:env=prod,!legacy,tier in (cache,db)", Freeze: freezePending, Message: "Stack/db is not labelled yet"}},
				Message: "ReadOnly Lock(s) [not-legacy] cover it, but the freeze is not in force yet (their ReadOnly condition is Pending): its updates are not refused until it is; " +
					"then updates and patches of its spec and metadata are refused, except by the principals the installation exempts (the navique operator's ServiceAccount by default)",
			},
		},
		"NotFrozen": {
			reason: "Stack web is covered by CanNotDelete Locks only: its updates are never blocked.",
			object: object("web", map[string]string{"tier": "web"}),
			want:   &whyUpdate{Locks: []whyFreeze{}, Message: "no ReadOnly Lock covers it: lockguard never blocks its updates"},
		},
		"RelabelledOut": {
			reason: "Stack cache marked legacy is out of not-legacy's selector.",
			object: object("cache", map[string]string{"tier": "cache", "env": "prod", "legacy": "true"}),
			want:   &whyUpdate{Locks: []whyFreeze{}, Message: "no ReadOnly Lock covers it: lockguard never blocks its updates"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, updateVerdict(whyLocks(), tc.object), cmpopts.IgnoreUnexported(whyUpdate{})); diff != "" {
				t.Errorf("%s\nupdateVerdict(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestWhyPrintScope: the text of why shows the selector Locks against the
// resource's labels and the update verdict with each freeze's state.
func TestWhyPrintScope(t *testing.T) {
	db := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "db", Labels: map[string]string{"tier": "db", "env": "prod"}}
	locks := whyLocks()
	r := &whyReport{
		Target:    whyTarget{Group: lockv1alpha1.Group, Kind: "Stack", Namespace: "forge", Name: "db", Labels: db.Labels},
		Selectors: selectorVerdicts(locks, db),
		Update:    updateVerdict(locks, db),
	}
	var out bytes.Buffer
	if err := r.printSelectors(&out); err != nil {
		t.Fatal(err)
	}
	if err := r.printUpdate(&out); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"Selector Locks of namespace forge, against its labels (env=prod,tier=db):\n" +
		"LOCK         SELECTOR                                       LEVEL          COVERS   REQUIREMENTS\n" +
		"everything   <all>                                          CanNotDelete   yes      none (empty selector: every resource and the namespace)\n" +
		"gateways     selector:<none>;kinds=Gateway                  CanNotDelete   no       kind in (Gateway): not met (kind=Stack)\n" +
		"not-legacy   selector:env=prod,!legacy,tier in (cache,db)   ReadOnly       yes      env=prod: met (env=prod); !legacy: met (no label legacy); tier in (cache,db): met (tier=db)\n" +
		"tier-db      selector:tier=db                               CanNotDelete   yes      tier=db: met (tier=db)\n" +
		"web          selector:tier=web                              CanNotDelete   no       tier=web: not met (tier=db)\n" +
		"UPDATE stack.core.navique.com/db in namespace forge: spec and metadata frozen by lockguard (in force)\n" +
		"  " + r.Update.Message + "\n" +
		"LOCK         SCOPE                                          FREEZE    MESSAGE\n" +
		"freeze-db    Stack/db                                       InForce   every resource it covers is frozen\n" +
		"not-legacy   selector:env=prod,!legacy,tier in (cache,db)   Pending   Stack/db is not labelled yet\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("printSelectors, printUpdate: -want, +got:\n%s", diff)
	}
}

// TestUpdateAnswer: the update verdict for the asking user is the API
// server's answer to their dry-run PATCH: allowed (an exempt principal),
// denied by lockguard's update guard, refused because lockguard does not
// answer, or failed before lockguard decided (RBAC).
func TestUpdateAnswer(t *testing.T) {
	if updateDenialPrefix != "resource is read-only under Lock(s) " {
		t.Fatalf("updateDenialPrefix %q, not how webhook.UpdateDenialMessage begins", updateDenialPrefix)
	}
	db := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "db", Labels: map[string]string{"tier": "db", "env": "prod"}}
	denied := errors.New(`admission webhook "update.lockguard.core.navique.com" denied the request: resource is read-only under Lock(s) [freeze-db not-legacy] (the update changes metadata.annotations[kubectl-lock.core.navique.com/why]); delete the Lock(s) or set their level to CanNotDelete before changing this resource`)
	down := errors.New(`Internal error occurred: failed calling webhook "update.lockguard.core.navique.com": failed to call webhook: connection refused`)
	rbac := errors.New(`stacks.core.navique.com "db" is forbidden: User "bob" cannot patch resource "stacks" in API group "core.navique.com" in the namespace "forge"`)
	type answer struct {
		Refused         bool
		Answer, Verdict string
		Message         string
	}
	cases := map[string]struct {
		reason string
		user   string
		err    error
		want   answer
	}{
		"Exempt": {reason: "the operator's dry run is allowed: exempt", user: "system:serviceaccount:navique-system:navique-operator",
			want: answer{Answer: "allowed", Verdict: "not refused by lockguard for system:serviceaccount:navique-system:navique-operator",
				Message: "ReadOnly Lock(s) [freeze-db not-legacy] cover it and the freeze is in force, but lockguard does not refuse system:serviceaccount:navique-system:navique-operator's updates: " +
					"a server-side dry-run PATCH of its metadata as system:serviceaccount:navique-system:navique-operator was allowed " +
					"(a principal the installation exempts, such as the navique operator's ServiceAccount by default, or no update guard serves)"}},
		"Refused": {reason: "a person's dry run is denied by the update guard", user: "jane", err: denied,
			want: answer{Refused: true, Answer: denied.Error(), Verdict: "refused by lockguard for jane",
				Message: "ReadOnly Lock(s) [freeze-db not-legacy] cover it and lockguard refuses jane's updates and patches of its spec and metadata " +
					"(a server-side dry-run PATCH of its metadata as jane was denied by lockguard's update guard); its status subresource stays writable"}},
		"Down": {reason: "lockguard does not answer: the API server refuses (failurePolicy Fail)", err: down,
			want: answer{Refused: true, Answer: down.Error(), Verdict: "refused by lockguard for you",
				Message: "ReadOnly Lock(s) [freeze-db not-legacy] cover it, and lockguard does not answer now: the API server refuses your updates of its spec and metadata " +
					"(failurePolicy Fail) until it does (a server-side dry-run PATCH of its metadata as you failed)"}},
		"RBAC": {reason: "RBAC refuses the PATCH before lockguard is asked: unknown, not refused by lockguard", user: "bob", err: rbac,
			want: answer{Answer: rbac.Error(), Verdict: "unknown for bob (the dry run failed before lockguard decided)",
				Message: "ReadOnly Lock(s) [freeze-db not-legacy] cover it; whether lockguard refuses bob's updates is not known: " +
					"a server-side dry-run PATCH of its metadata as bob failed before lockguard decided"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			u := updateVerdict(whyLocks(), db)
			u.answer(tc.user, tc.err)
			got := answer{Refused: u.Refused, Answer: u.Answer, Verdict: u.verdict(), Message: u.Message}
			if diff := cmp.Diff(tc.want, got); diff != "" || !u.Asked || u.User != tc.user {
				t.Errorf("%s\nanswer(%q, %v): asked %t, user %q; -want, +got:\n%s", tc.reason, tc.user, tc.err, u.Asked, u.User, diff)
			}
		})
	}
}
