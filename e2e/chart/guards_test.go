package chart_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestGuardWebhooks checks the namespace, CRD, update and ClusterLock
// guards' webhook entries (the update guard's two: the objects labelled
// read-only, and every subresource but status in the namespaces holding
// Locks; the ClusterLock guard's four: the deletes and the label removals
// of the objects labelled cluster-locked, the updates of those labelled
// read-only (ReadOnly ClusterLocks, with the update guard), and the
// ClusterLock creates, which label the target first) and their
// values: on by default, each turned off by its own value, none rendered
// in mode policy (which renders no webhook).
func TestGuardWebhooks(t *testing.T) {
	requireHelm(t)
	type entry struct {
		Name              string
		Rules             []admissionregistrationv1.RuleWithOperations
		ObjectSelector    *metav1.LabelSelector
		NamespaceSelector *metav1.LabelSelector
		MatchConditions   []admissionregistrationv1.MatchCondition
		FailurePolicy     admissionregistrationv1.FailurePolicyType
	}
	cluster := admissionregistrationv1.ClusterScope
	rule := func(group, resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}, Scope: &cluster},
		}}
	}
	namespace := entry{
		Name:           "namespace.lockguard.core.navique.com",
		Rules:          rule("", "namespaces"),
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"core.navique.com/has-locks": "true"}},
		FailurePolicy:  admissionregistrationv1.Fail,
	}
	crd := entry{
		Name:            "crd.lockguard.core.navique.com",
		Rules:           rule("apiextensions.k8s.io", "customresourcedefinitions"),
		MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "core-navique-com-group", Expression: "oldObject.spec.group == 'core.navique.com'"}},
		FailurePolicy:   admissionregistrationv1.Fail,
	}
	namespaced := admissionregistrationv1.NamespacedScope
	update := entry{
		Name: "update.lockguard.core.navique.com",
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"core.navique.com"}, APIVersions: []string{"*"}, Resources: []string{"*"}, Scope: &namespaced},
		}},
		ObjectSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"core.navique.com/read-only": "true"}},
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "not-a-lock", Expression: "request.resource.resource != 'locks'"},
			{Name: "not-exempt", Expression: "!(request.userInfo.username in ['system:serviceaccount:lockguard-system:lockguard', 'system:serviceaccount:navique-system:navique-operator'])"},
		},
		FailurePolicy: admissionregistrationv1.Fail,
	}
	updateGroups := update
	exemptGroups := admissionregistrationv1.MatchCondition{Name: "not-exempt",
		Expression: "!(request.userInfo.username in ['system:serviceaccount:lockguard-system:lockguard', 'alice']) && !request.userInfo.groups.exists(g, g in ['ops', 'system:masters'])"}
	updateGroups.MatchConditions = []admissionregistrationv1.MatchCondition{update.MatchConditions[0], exemptGroups}
	subresource := entry{
		Name: "subresource.lockguard.core.navique.com",
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{"core.navique.com"}, APIVersions: []string{"*"}, Resources: []string{"*/*"}, Scope: &namespaced},
		}},
		NamespaceSelector: namespace.ObjectSelector,
		MatchConditions: append([]admissionregistrationv1.MatchCondition{
			{Name: "subresource-not-status", Expression: "has(request.subResource) && request.subResource != 'status'"}}, update.MatchConditions...),
		FailurePolicy: admissionregistrationv1.Fail,
	}
	subresourceGroups := subresource
	subresourceGroups.MatchConditions = []admissionregistrationv1.MatchCondition{subresource.MatchConditions[0], subresource.MatchConditions[1], exemptGroups}
	// Without the namespace guard's label, every namespace.
	subresourceAll := subresource
	subresourceAll.NamespaceSelector = nil
	// The ClusterLock guard's two: the DELETE, and the UPDATE that removes
	// the label, of the cluster-scoped kinds a ClusterLock can name, of
	// the objects labelled cluster-locked only.
	clusterRules := func(op admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		var rules []admissionregistrationv1.RuleWithOperations
		for _, r := range [][]string{{"", "namespaces", "persistentvolumes"}, {"apiextensions.k8s.io", "customresourcedefinitions"},
			{"rbac.authorization.k8s.io", "clusterroles"}, {"storage.k8s.io", "storageclasses"}, {"core.navique.com", "*"}} {
			rules = append(rules, admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{op},
				Rule: admissionregistrationv1.Rule{APIGroups: r[:1], APIVersions: []string{"*"}, Resources: r[1:], Scope: &cluster}})
		}
		return rules
	}
	clusterLocked := &metav1.LabelSelector{MatchLabels: map[string]string{"core.navique.com/cluster-locked": "true"}}
	notClusterLock := admissionregistrationv1.MatchCondition{Name: "not-a-clusterlock", Expression: "request.resource.resource != 'clusterlocks'"}
	clusterLock := entry{Name: "cluster-lock.lockguard.core.navique.com", Rules: clusterRules(admissionregistrationv1.Delete), ObjectSelector: clusterLocked,
		MatchConditions: []admissionregistrationv1.MatchCondition{notClusterLock}, FailurePolicy: admissionregistrationv1.Fail}
	clusterLabel := entry{Name: "cluster-label.lockguard.core.navique.com", Rules: clusterRules(admissionregistrationv1.Update), ObjectSelector: clusterLocked,
		MatchConditions: []admissionregistrationv1.MatchCondition{notClusterLock,
			{Name: "label-removed-or-changed", Expression: "has(oldObject.metadata.labels) && 'core.navique.com/cluster-locked' in oldObject.metadata.labels && oldObject.metadata.labels['core.navique.com/cluster-locked'] == 'true' && !(has(object.metadata.labels) && 'core.navique.com/cluster-locked' in object.metadata.labels && object.metadata.labels['core.navique.com/cluster-locked'] == 'true')"},
			{Name: "not-lockguard", Expression: "request.userInfo.username != 'system:serviceaccount:lockguard-system:lockguard'"}},
		FailurePolicy: admissionregistrationv1.Fail}
	// ReadOnly ClusterLocks (rules 16 and 22): the UPDATEs of the objects
	// labelled read-only, but the exempt principals'.
	clusterUpdate := entry{Name: "cluster-update.lockguard.core.navique.com", Rules: clusterRules(admissionregistrationv1.Update),
		ObjectSelector: update.ObjectSelector, MatchConditions: []admissionregistrationv1.MatchCondition{notClusterLock, update.MatchConditions[1]},
		FailurePolicy: admissionregistrationv1.Fail}
	clusterUpdateGroups := clusterUpdate
	clusterUpdateGroups.MatchConditions = []admissionregistrationv1.MatchCondition{notClusterLock, exemptGroups}
	clusterCreate := entry{Name: "cluster-create.lockguard.core.navique.com", Rules: []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"core.navique.com"}, APIVersions: []string{"*"}, Resources: []string{"clusterlocks"}, Scope: &cluster}}},
		FailurePolicy: admissionregistrationv1.Fail}
	// Kinds of other groups by opt-in (docs/contract.md rule 21): their
	// DELETEs, and the UPDATEs of those a ReadOnly Lock covers, in the
	// namespaces holding Locks only.
	optIn := func(op admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{
			{Operations: []admissionregistrationv1.OperationType{op}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"*"}, Resources: []string{"persistentvolumeclaims", "secrets"}, Scope: &namespaced}},
			{Operations: []admissionregistrationv1.OperationType{op}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"*"}, Resources: []string{"statefulsets"}, Scope: &namespaced}},
		}
	}
	protected := func(op metav1.LabelSelectorOperator) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: lockv1alpha1.ProtectedLabel, Operator: op}}}
	}
	protect := entry{
		Name:              "protect.lockguard.core.navique.com",
		Rules:             optIn(admissionregistrationv1.Delete),
		NamespaceSelector: namespace.ObjectSelector,
		ObjectSelector:    protected(metav1.LabelSelectorOpDoesNotExist),
		FailurePolicy:     admissionregistrationv1.Fail,
	}
	// No namespaceSelector: the API server matches the objectSelector
	// against the object itself (issue 40).
	protectLocked := entry{
		Name:           "protect-locked.lockguard.core.navique.com",
		Rules:          optIn(admissionregistrationv1.Delete),
		ObjectSelector: protected(metav1.LabelSelectorOpExists),
		FailurePolicy:  admissionregistrationv1.Fail,
	}
	protectUpdate := entry{
		Name:              "protect-update.lockguard.core.navique.com",
		Rules:             optIn(admissionregistrationv1.Update),
		NamespaceSelector: namespace.ObjectSelector,
		ObjectSelector:    update.ObjectSelector,
		MatchConditions:   update.MatchConditions[1:],
		FailurePolicy:     admissionregistrationv1.Fail,
	}
	protectJSON := []string{`protect.resources=[{"group":"","resources":["persistentvolumeclaims","secrets"]},{"group":"apps","resources":["statefulsets"]}]`}
	cases := map[string]struct {
		reason  string
		set     []string
		setJSON []string
		want    []entry
	}{
		"Protect": {reason: "protect.resources adds the protect entry, selecting the namespaces holding Locks, the protect-locked entry, selecting the labelled objects, and protect-update",
			setJSON: protectJSON, want: []entry{namespace, crd, update, subresource, clusterLock, clusterLabel, clusterUpdate, clusterCreate, protect, protectLocked, protectUpdate}},
		"ProtectNoReadOnly": {reason: "without the update guard, the protect and protect-locked entries alone",
			set: []string{"guards.readOnly.enabled=false"}, setJSON: protectJSON, want: []entry{namespace, crd, clusterLock, clusterLabel, clusterCreate, protect, protectLocked}},
		"Default": {reason: "every guard is on by default", want: []entry{namespace, crd, update, subresource, clusterLock, clusterLabel, clusterUpdate, clusterCreate}},
		"NoNamespace": {reason: "guards.namespace.enabled=false drops the namespace entry, and the subresource entry's namespaceSelector (no namespace is labelled)",
			set: []string{"guards.namespace.enabled=false"}, want: []entry{crd, update, subresourceAll, clusterLock, clusterLabel, clusterUpdate, clusterCreate}},
		"NoCRD":      {reason: "guards.crd.enabled=false drops the CRD entry", set: []string{"guards.crd.enabled=false"}, want: []entry{namespace, update, subresource, clusterLock, clusterLabel, clusterUpdate, clusterCreate}},
		"NoReadOnly": {reason: "guards.readOnly.enabled=false drops both update entries and cluster-update", set: []string{"guards.readOnly.enabled=false"}, want: []entry{namespace, crd, clusterLock, clusterLabel, clusterCreate}},
		"NoClusterLock": {reason: "guards.clusterLock.enabled=false drops the four ClusterLock entries", set: []string{"guards.clusterLock.enabled=false"},
			want: []entry{namespace, crd, update, subresource}},
		"Exempt": {reason: "readOnly.exemptPrincipals: users and group:NAME groups, besides lockguard's own ServiceAccount, skipped by a matchCondition",
			set: []string{"readOnly.exemptPrincipals={alice,group:ops,group:system:masters}"}, want: []entry{namespace, crd, updateGroups, subresourceGroups, clusterLock, clusterLabel, clusterUpdateGroups, clusterCreate}},
		"None": {reason: "all off leave the object guard alone", set: framework.ObjectGuardOnly, want: nil},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			vwc := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t,
				framework.Find(render(t, framework.Release{Set: tc.set, SetJSON: tc.setJSON}), "ValidatingWebhookConfiguration", "lockguard"))
			// The identity Leases', the unlock and the exception entries are
			// not guards: TestPeerLeasesRender, TestUnlockRender,
			// TestWebhookConfiguration.
			vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
				return w.Name == "peer-leases.lockguard.core.navique.com" || w.Name == "unlock.lockguard.core.navique.com" ||
					w.Name == "cluster-unlock.lockguard.core.navique.com" || w.Name == "exception.lockguard.core.navique.com"
			})
			if vwc.Webhooks[0].Name != framework.DefaultWebhookName {
				t.Fatalf("first webhook %s, want the object guard's %s", vwc.Webhooks[0].Name, framework.DefaultWebhookName)
			}
			var got []entry
			last := vwc.Webhooks[len(vwc.Webhooks)-1]
			if last.Name != "create.lockguard.core.navique.com" || *last.ClientConfig.Service.Path != "/validate-lock-create" || *last.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("last webhook %s at %s, failurePolicy %s; want the Lock create entry at /validate-lock-create, Fail", last.Name, *last.ClientConfig.Service.Path, *last.FailurePolicy)
			}
			for _, wh := range vwc.Webhooks[1 : len(vwc.Webhooks)-1] {
				path, sideEffects := "/validate-delete", admissionregistrationv1.SideEffectClassNoneOnDryRun
				switch wh.Name {
				case update.Name, subresource.Name, protectUpdate.Name:
					path = "/validate-update"
				case clusterUpdate.Name:
					// Its refusal records nothing.
					path, sideEffects = "/validate-cluster-update", admissionregistrationv1.SideEffectClassNone
				case clusterLock.Name:
					path = "/validate-cluster-delete"
				case clusterCreate.Name:
					path = "/validate-cluster-lock-create"
				case clusterLabel.Name:
					// Its refusal records nothing.
					path, sideEffects = "/validate-cluster-label", admissionregistrationv1.SideEffectClassNone
				}
				if *wh.SideEffects != sideEffects || *wh.MatchPolicy != admissionregistrationv1.Equivalent ||
					wh.ClientConfig.Service == nil || *wh.ClientConfig.Service.Path != path {
					t.Errorf("%s: sideEffects %s, matchPolicy %s, clientConfig %+v; want %s, Equivalent, the webhook Service at %s",
						wh.Name, *wh.SideEffects, *wh.MatchPolicy, wh.ClientConfig, sideEffects, path)
				}
				got = append(got, entry{Name: wh.Name, Rules: wh.Rules, ObjectSelector: wh.ObjectSelector, NamespaceSelector: wh.NamespaceSelector,
					MatchConditions: wh.MatchConditions, FailurePolicy: *wh.FailurePolicy})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nguard webhooks: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNamespaceGuardRBAC: the namespaces rule (get, list, watch, patch:
// the label; with persistent volumes, which the ClusterLock guard labels
// too) is granted with the namespace guard or the ClusterLock guard, the
// ClusterRoles and StorageClasses rules (never escalate: it would let
// lockguard's ServiceAccount widen any ClusterRole) with the ClusterLock
// guard only, and lockguard is told when a guard is off.
func TestNamespaceGuardRBAC(t *testing.T) {
	requireHelm(t)
	for _, ns := range []bool{true, false} {
		for _, cl := range []bool{true, false} {
			objs := render(t, framework.Release{Set: []string{fmt.Sprintf("guards.namespace.enabled=%t", ns), fmt.Sprintf("guards.clusterLock.enabled=%t", cl)}})
			role := convert[rbacv1.ClusterRole](t, framework.Find(objs, "ClusterRole", "lockguard"))
			var got []rbacv1.PolicyRule
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "namespaces") || slices.Contains(r.Resources, "clusterroles") || slices.Contains(r.Resources, "storageclasses") {
					got = append(got, r)
				}
			}
			var want []rbacv1.PolicyRule
			if ns || cl {
				want = append(want, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "persistentvolumes"}, Verbs: []string{"get", "list", "patch", "watch"}})
			}
			if cl {
				want = append(want,
					rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"get", "list", "patch", "watch"}},
					rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "patch", "watch"}})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("guards.namespace.enabled=%t, guards.clusterLock.enabled=%t: rules: -want, +got:\n%s", ns, cl, diff)
			}
			args := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard")).Spec.Template.Spec.Containers[0].Args
			if slices.Contains(args, "--namespace-guard=false") == ns || slices.Contains(args, "--cluster-lock-guard=false") == cl {
				t.Errorf("guards.namespace.enabled=%t, guards.clusterLock.enabled=%t: args %v", ns, cl, args)
			}
		}
	}
}

// TestCascadeGuardValue: guards.cascade reaches lockguard as
// --cascade-guard; the cascade guard answers through the object guard's
// webhook entry, so the webhook configuration does not change.
func TestCascadeGuardValue(t *testing.T) {
	requireHelm(t)
	base := framework.Find(render(t, framework.Release{}), "ValidatingWebhookConfiguration", "lockguard")
	for _, mode := range []string{"Deny", "Warn", "Off"} {
		objs := render(t, framework.Release{Set: []string{"guards.cascade=" + mode}})
		d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
		if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--cascade-guard="+mode) {
			t.Errorf("guards.cascade=%s: args %v; want --cascade-guard=%s", mode, args, mode)
		}
		if diff := cmp.Diff(base.Object, framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard").Object); diff != "" {
			t.Errorf("guards.cascade=%s: the webhook configuration changed: -default, +got:\n%s", mode, diff)
		}
	}
}

// TestExceptionsBesidePolicy: in mode both, where the chart's policy
// refuses what a LockException lets through the webhook, lockguard is
// told so (--exceptions-beside-policy) and warns on each exception's
// create; in mode webhook it is not (docs/contract.md rule 20).
func TestExceptionsBesidePolicy(t *testing.T) {
	requireHelm(t)
	for mode, want := range map[string]bool{"webhook": false, "both": true} {
		objs := render(t, framework.Release{Set: []string{"mode=" + mode}, APIVersions: []string{vapCapability}})
		d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
		if got := slices.Contains(d.Spec.Template.Spec.Containers[0].Args, "--exceptions-beside-policy"); got != want {
			t.Errorf("mode=%s: --exceptions-beside-policy %t, want %t (args %v)", mode, got, want, d.Spec.Template.Spec.Containers[0].Args)
		}
	}
}

// TestReadOnlyGuardValues: guards.readOnly.enabled and
// readOnly.exemptPrincipals reach lockguard as --read-only-guard and one
// --read-only-exempt each; mode policy, which renders no update entry,
// tells lockguard that no update guard serves (its ReadOnly Locks then say
// GuardDisabled, never InForce: docs/contract.md rule 16).
func TestReadOnlyGuardValues(t *testing.T) {
	requireHelm(t)
	cases := map[string]struct {
		reason string
		set    []string
		want   []string
	}{
		"Policy":   {reason: "mode policy: no webhook, so no update guard, whatever guards.readOnly.enabled says", set: []string{"mode=policy"}, want: []string{"--read-only-guard=false"}},
		"Both":     {reason: "mode both keeps the webhook, and the update guard", set: []string{"mode=both"}, want: []string{"--read-only-exempt=system:serviceaccount:navique-system:navique-operator"}},
		"Default":  {reason: "the navique operator's ServiceAccount", want: []string{"--read-only-exempt=system:serviceaccount:navique-system:navique-operator"}},
		"Off":      {reason: "the guard off, no principals", set: []string{"guards.readOnly.enabled=false"}, want: []string{"--read-only-guard=false"}},
		"Several":  {reason: "one flag per principal", set: []string{"readOnly.exemptPrincipals={alice,group:ops}"}, want: []string{"--read-only-exempt=alice", "--read-only-exempt=group:ops"}},
		"NoneSaid": {reason: "an empty list exempts lockguard alone", set: []string{"readOnly.exemptPrincipals=null"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := convert[appsv1.Deployment](t, framework.Find(render(t, framework.Release{Set: tc.set, APIVersions: []string{vapCapability}}), "Deployment", "lockguard"))
			var got []string
			for _, a := range d.Spec.Template.Spec.Containers[0].Args {
				if strings.HasPrefix(a, "--read-only-") {
					got = append(got, a)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nread-only flags: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestReadOnlyEveryoneRefused: values.schema.json refuses, as lockguard
// does at start (webhook.ParseExemptions), an exempt principal that holds
// every user or every ServiceAccount (issue 36); a namespace's
// ServiceAccounts and system:masters are accepted.
func TestReadOnlyEveryoneRefused(t *testing.T) {
	requireHelm(t)
	for _, p := range []string{"group:system:authenticated", "group:system:unauthenticated", "group:system:serviceaccounts", "system:anonymous"} {
		t.Run(p, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: []string{"readOnly.exemptPrincipals={alice," + p + "}"}})
			if want := "/readOnly/exemptPrincipals/1"; err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("readOnly.exemptPrincipals={alice,%s}: helm template error %v; want one naming %s", p, err, want)
			}
		})
	}
	set := []string{"readOnly.exemptPrincipals={group:system:serviceaccounts:navique-system,group:system:masters,system:serviceaccount:a:b}"}
	d := convert[appsv1.Deployment](t, framework.Find(render(t, framework.Release{Set: set}), "Deployment", "lockguard"))
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--read-only-exempt=group:system:serviceaccounts:navique-system") {
		t.Errorf("%s: args %v; want the namespace's ServiceAccounts exempt", set, args)
	}
}
