package chart_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/navique/lockguard/e2e/framework"
)

// TestPeerLeasesRender checks where the chart puts the rule that only
// lockguard writes its replicas' identity Leases (issue 36): a
// ValidatingAdmissionPolicy where the API server serves them (1.30+),
// the webhook entry peer-leases.lockguard.core.navique.com before, narrow
// (labelled Leases of the release namespace, principals without the verb
// lockguard-peer) and failing closed; neither without the webhook.
func TestPeerLeasesRender(t *testing.T) {
	requireHelm(t)
	const writer = "authorizer.group('coordination.k8s.io').resource('leases').namespace(request.namespace).check('lockguard-peer').allowed()"
	wantEntry := admissionregistrationv1.ValidatingWebhook{
		Name:                    "peer-leases.lockguard.core.navique.com",
		AdmissionReviewVersions: []string{"v1"},
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "lockguard-system", Name: "lockguard-webhook", Path: ptr.To("/validate-peer-lease"), Port: ptr.To[int32](443)}},
		FailurePolicy:  ptr.To(admissionregistrationv1.Fail),
		MatchPolicy:    ptr.To(admissionregistrationv1.Equivalent),
		SideEffects:    ptr.To(admissionregistrationv1.SideEffectClassNone),
		TimeoutSeconds: ptr.To[int32](5),
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "lockguard.navique.com/peers", Operator: metav1.LabelSelectorOpExists}}},
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"*"}, Resources: []string{"leases"},
				Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}},
		MatchConditions: []admissionregistrationv1.MatchCondition{
			{Name: "release-namespace", Expression: "request.namespace == 'lockguard-system'"},
			{Name: "not-lockguard", Expression: "!(" + writer + ")"},
		},
	}
	for name, tc := range map[string]struct {
		reason        string
		r             framework.Release
		entry, policy bool
	}{
		"Before130":  {reason: "no admissionregistration.k8s.io/v1 policies: lockguard's own webhook entry", r: framework.Release{KubeVersion: "1.29.15"}, entry: true},
		"From130":    {reason: "an in-process policy, which holds while lockguard is down", r: framework.Release{APIVersions: []string{vapCapability}}, policy: true},
		"Both":       {reason: "mode both on 1.30+: the policy", r: framework.Release{Set: []string{"mode=both"}, APIVersions: []string{vapCapability}}, policy: true},
		"PolicyMode": {reason: "mode policy runs no webhook, so no peer protocol: nothing", r: framework.Release{Set: []string{"mode=policy"}, APIVersions: []string{vapCapability}}},
	} {
		t.Run(name, func(t *testing.T) {
			objs := render(t, tc.r)
			vap, ok := entryAndPolicy(t, objs, tc.reason, wantEntry, tc.entry, "lockguard-peer-leases", tc.policy)
			if !ok {
				return
			}
			mc := vap.Spec.MatchConstraints
			if *vap.Spec.FailurePolicy != admissionregistrationv1.Fail || len(vap.Spec.Validations) != 1 || vap.Spec.Validations[0].Expression != writer ||
				mc.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "lockguard-system" ||
				cmp.Diff(wantEntry.ObjectSelector, mc.ObjectSelector) != "" || len(mc.ResourceRules) != 1 ||
				cmp.Diff(wantEntry.Rules[0].Operations, mc.ResourceRules[0].Operations) != "" || mc.ResourceRules[0].Resources[0] != "leases" {
				t.Errorf("%s\npolicy spec %+v: want Fail, the writer check, the release namespace's labelled Leases", tc.reason, vap.Spec)
			}
		})
	}
}

// entryAndPolicy checks what the chart rendered (objs) of one rule the
// API server may enforce in-process: the webhook entry named as
// wantEntry, equal to it, rendered when entry is; the
// ValidatingAdmissionPolicy policy and its binding (Deny, of that
// policy), rendered when policy is. It returns the policy, and false when
// none was rendered (or t failed fatally).
func entryAndPolicy(t *testing.T, objs []*unstructured.Unstructured, reason string, wantEntry admissionregistrationv1.ValidatingWebhook, entry bool, policy string, rendered bool) (*admissionregistrationv1.ValidatingAdmissionPolicy, bool) {
	t.Helper()
	var got *admissionregistrationv1.ValidatingWebhook
	if u := framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard"); u != nil {
		vwc := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, u)
		if i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == wantEntry.Name }); i >= 0 {
			got = &vwc.Webhooks[i]
		}
	}
	if (got != nil) != entry {
		t.Fatalf("%s\nwebhook entry %s rendered: %v, want %v", reason, wantEntry.Name, got != nil, entry)
	}
	if got != nil {
		if diff := cmp.Diff(wantEntry, *got); diff != "" {
			t.Errorf("%s\nthe entry: -want, +got:\n%s", reason, diff)
		}
	}
	u := framework.Find(objs, "ValidatingAdmissionPolicy", policy)
	b := framework.Find(objs, "ValidatingAdmissionPolicyBinding", policy)
	if (u != nil) != rendered || (b != nil) != rendered {
		t.Fatalf("%s\npolicy rendered: %v, binding: %v; want %v", reason, u != nil, b != nil, rendered)
	}
	if u == nil {
		return nil, false
	}
	vb := convert[admissionregistrationv1.ValidatingAdmissionPolicyBinding](t, b)
	if vb.Spec.PolicyName != policy || cmp.Diff([]admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}, vb.Spec.ValidationActions) != "" {
		t.Errorf("%s\nbinding spec %+v: want Deny of %s", reason, vb.Spec, policy)
	}
	return convert[admissionregistrationv1.ValidatingAdmissionPolicy](t, u), true
}
