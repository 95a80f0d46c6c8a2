package chart_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// unlockCEL returns the chart's CEL of a refusal whose Go text is msg, a
// message of Lock NS/NAME: the chart renders the name from the request,
// the rest word for word as api/v1alpha1 (docs/contract.md rule 18).
func unlockCEL(msg string) string {
	return "'" + strings.Replace(msg, "NS/NAME", "' + request.namespace + '/' + oldObject.metadata.name + '", 1) + "'"
}

// TestUnlockRender checks where the chart puts the unlock permission
// (issue 39): a ValidatingAdmissionPolicy where the API server serves
// them (1.30+, whatever the mode), the webhook entry
// unlock.lockguard.core.navique.com before, failing open with a short
// timeout (deleting a Lock never hangs, rule 8); the same exemptions and
// the same messages, those of api/v1alpha1; neither with
// unlockPermission.enabled=false.
func TestUnlockRender(t *testing.T) {
	requireHelm(t)
	const unlocker = "authorizer.group('core.navique.com').resource('locks').namespace(request.namespace).name(oldObject.metadata.name).check('unlock').allowed()"
	notExempt := admissionregistrationv1.MatchCondition{Name: "not-exempt",
		Expression: "!(request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller'])"}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{APIGroups: []string{lockv1alpha1.Group}, APIVersions: []string{"*"}, Resources: []string{"locks"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}}
	wantEntry := admissionregistrationv1.ValidatingWebhook{
		Name:                    "unlock.lockguard.core.navique.com",
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "lockguard-system", Name: "lockguard-webhook", Path: ptr.To("/validate-unlock"), Port: ptr.To[int32](443)}},
		FailurePolicy:   ptr.To(admissionregistrationv1.Ignore),
		MatchPolicy:     ptr.To(admissionregistrationv1.Equivalent),
		SideEffects:     ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds:  ptr.To[int32](3),
		Rules:           rules,
		MatchConditions: []admissionregistrationv1.MatchCondition{notExempt, {Name: "not-an-unlocker", Expression: "!(" + unlocker + ")"}},
	}
	wantPolicy := admissionregistrationv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: ptr.To(admissionregistrationv1.Fail),
		MatchConstraints: &admissionregistrationv1.MatchResources{MatchPolicy: ptr.To(admissionregistrationv1.Equivalent),
			ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: rules[0]}}},
		MatchConditions: []admissionregistrationv1.MatchCondition{notExempt},
		Variables:       []admissionregistrationv1.Variable{{Name: "unlocker", Expression: unlocker}},
		Validations: []admissionregistrationv1.Validation{
			{Expression: "request.operation != 'DELETE' || variables.unlocker",
				MessageExpression: unlockCEL(lockv1alpha1.UnlockDeleteMessage("NS", "NAME")), Reason: ptr.To(metav1.StatusReasonForbidden)},
			{Expression: "request.operation != 'UPDATE' || !(!(has(oldObject.spec.enforcement) && oldObject.spec.enforcement == 'Audit') && has(object.spec.enforcement) && object.spec.enforcement == 'Audit') || variables.unlocker",
				MessageExpression: unlockCEL(lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredEnforcement, "NS", "NAME")), Reason: ptr.To(metav1.StatusReasonForbidden)},
			{Expression: "request.operation != 'UPDATE' || !(has(object.spec.expiresAt) && (!has(oldObject.spec.expiresAt) || timestamp(string(object.spec.expiresAt)) < timestamp(string(oldObject.spec.expiresAt)))) || variables.unlocker",
				MessageExpression: unlockCEL(lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredExpiry, "NS", "NAME")), Reason: ptr.To(metav1.StatusReasonForbidden)},
			{Expression: "request.operation != 'UPDATE' || !(has(oldObject.spec.level) && oldObject.spec.level == 'ReadOnly' && !(has(object.spec.level) && object.spec.level == 'ReadOnly')) || variables.unlocker",
				MessageExpression: unlockCEL(lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredLevel, "NS", "NAME")), Reason: ptr.To(metav1.StatusReasonForbidden)},
		},
	}
	for name, tc := range map[string]struct {
		reason        string
		r             framework.Release
		entry, policy bool
	}{
		"Before130":  {reason: "no admissionregistration.k8s.io/v1 policies: lockguard's webhook entry", r: framework.Release{KubeVersion: "1.29.15"}, entry: true},
		"From130":    {reason: "an in-process policy, which holds while lockguard is down", r: framework.Release{APIVersions: []string{vapCapability}}, policy: true},
		"PolicyMode": {reason: "mode policy: the policy, which needs no webhook", r: framework.Release{Set: []string{"mode=policy"}, APIVersions: []string{vapCapability}}, policy: true},
		"Off129":     {reason: "unlockPermission.enabled=false: delete and update alone decide", r: framework.Release{Set: []string{"unlockPermission.enabled=false"}, KubeVersion: "1.29.15"}},
		"Off130":     {reason: "unlockPermission.enabled=false: delete and update alone decide", r: framework.Release{Set: []string{"unlockPermission.enabled=false"}, APIVersions: []string{vapCapability}}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, tc.r)
			vap, ok := entryAndPolicy(t, objs, tc.reason, wantEntry, tc.entry, "lockguard-unlock", tc.policy)
			if !ok {
				return
			}
			if diff := cmp.Diff(wantPolicy, vap.Spec); diff != "" {
				t.Errorf("%s\nthe policy: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestLockRoles checks the ClusterRoles the chart ships for Locks (issue
// 39): view and edit aggregated into the built-in roles, view reading
// LockExceptions too, edit without the verb unlock and without
// LockExceptions, unlock and break-glass aggregated nowhere, break-glass
// granting the LockExceptions its verb lets one create (docs/contract.md
// rule 20); and the two for ClusterLocks (rule 22), aggregated nowhere:
// lockguard-cluster-lock creating, reading, updating and patching them
// (raising: lowering needs the verb unlock, contract test
// TestClusterLockRoleCannotLower), lockguard-cluster-unlock deleting them
// with the verb unlock. Named as api/v1alpha1 names them, whatever the
// release's name.
func TestLockRoles(t *testing.T) {
	requireHelm(t)
	aggregate := func(roles ...string) map[string]string {
		m := map[string]string{}
		for _, r := range roles {
			m["rbac.authorization.k8s.io/aggregate-to-"+r] = "true"
		}
		return m
	}
	rule := func(verbs ...string) []rbacv1.PolicyRule {
		return []rbacv1.PolicyRule{{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"locks"}, Verbs: verbs}}
	}
	type role struct {
		Aggregate map[string]string
		Rules     []rbacv1.PolicyRule
	}
	want := map[string]role{
		lockv1alpha1.ViewRole: {aggregate("view", "edit", "admin"), []rbacv1.PolicyRule{{APIGroups: []string{lockv1alpha1.Group},
			Resources: []string{"locks", "lockexceptions"}, Verbs: []string{"get", "list", "watch"}}}},
		lockv1alpha1.EditRole:   {aggregate("edit", "admin"), rule("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")},
		lockv1alpha1.UnlockRole: {aggregate(), rule(lockv1alpha1.UnlockVerb)},
		lockv1alpha1.BreakGlassRole: {aggregate(), append(rule(lockv1alpha1.BreakGlassVerb), rbacv1.PolicyRule{APIGroups: []string{lockv1alpha1.Group},
			Resources: []string{"lockexceptions"}, Verbs: []string{"create", "get", "list", "watch", "delete"}})},
		lockv1alpha1.ClusterLockRole: {aggregate(), []rbacv1.PolicyRule{{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"clusterlocks"},
			Verbs: []string{"create", "get", "list", "watch", "update", "patch"}}}},
		lockv1alpha1.ClusterUnlockRole: {aggregate(), []rbacv1.PolicyRule{{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"clusterlocks"},
			Verbs: []string{"delete", lockv1alpha1.UnlockVerb}}}},
	}
	objs := render(t, framework.Release{Name: "other"})
	got := map[string]role{}
	for name := range want {
		u := framework.Find(objs, "ClusterRole", name)
		if u == nil {
			t.Errorf("ClusterRole %s not rendered", name)
			continue
		}
		cr := convert[rbacv1.ClusterRole](t, u)
		r := role{Aggregate: map[string]string{}, Rules: cr.Rules}
		for k, v := range cr.Labels {
			if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
				r.Aggregate[k] = v
			}
		}
		if cr.Annotations["kubernetes.io/description"] == "" {
			t.Errorf("ClusterRole %s has no kubernetes.io/description", name)
		}
		got[name] = r
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClusterRoles: -want, +got:\n%s", diff)
	}
	if r := framework.Find(objs, "ClusterRole", lockv1alpha1.ClusterLockRole); r != nil {
		if d := r.GetAnnotations()["kubernetes.io/description"]; !strings.Contains(d, "not lower it") || !strings.Contains(d, lockv1alpha1.ClusterUnlockRole) {
			t.Errorf("ClusterRole %s's description does not say that lowering a ClusterLock needs %s: %q", lockv1alpha1.ClusterLockRole, lockv1alpha1.ClusterUnlockRole, d)
		}
	}
	for _, name := range []string{lockv1alpha1.BreakGlassRole, lockv1alpha1.ViewRole} {
		if r := framework.Find(objs, "ClusterRole", name); r != nil {
			if d := r.GetAnnotations()["kubernetes.io/description"]; !strings.Contains(d, "LockExceptions") || strings.Contains(d, "Not built yet") {
				t.Errorf("ClusterRole %s's description does not say what it grants of LockExceptions: %q", name, d)
			}
		}
	}
}
