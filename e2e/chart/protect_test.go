package chart_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/navique/lockguard/e2e/framework"
)

// TestProtectResourcesRender checks protect.resources (docs/contract.md
// rule 21) beyond its webhook entries (TestGuardWebhooks): lockguard gets
// one --protect-resource per resource, its ClusterRole may read and patch
// them (metadata: the annotation and labels), and the chart refuses them
// without the namespace guard, whose label their entries select on, and
// in mode policy, which renders no webhook.
func TestProtectResourcesRender(t *testing.T) {
	requireHelm(t)
	protect := []string{`protect.resources=[{"group":"","resources":["persistentvolumeclaims","secrets"]},{"group":"apps","resources":["statefulsets"]}]`}
	objs := render(t, framework.Release{SetJSON: protect})

	d := convert[appsv1.Deployment](t, framework.Find(objs, "Deployment", "lockguard"))
	var got []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if strings.HasPrefix(a, "--protect-resource=") {
			got = append(got, a)
		}
	}
	if want := []string{"--protect-resource=persistentvolumeclaims", "--protect-resource=secrets", "--protect-resource=statefulsets.apps"}; !slices.Equal(got, want) {
		t.Errorf("args: got %q, want %q", got, want)
	}

	role := convert[rbacv1.ClusterRole](t, framework.Find(objs, "ClusterRole", "lockguard"))
	verbs := []string{"get", "list", "watch", "patch"}
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims", "secrets"}, Verbs: verbs},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: verbs},
	} {
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, want.APIGroups) && slices.Equal(r.Resources, want.Resources) && slices.Equal(r.Verbs, want.Verbs)
		}) {
			t.Errorf("ClusterRole lacks %+v", want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for set, want := range map[string]string{
		"guards.namespace.enabled=false": "protect.resources needs guards.namespace.enabled",
		"mode=policy":                    "protect.resources needs the webhook (mode webhook or both)",
	} {
		_, err := framework.Render(ctx, framework.Release{KubeVersion: "1.37.2", Set: []string{set}, SetJSON: protect,
			APIVersions: []string{"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("protect.resources with %s: got %v, want the chart to refuse it (%q)", set, err, want)
		}
	}
}

// TestProtectResourcesCRDGroups checks the crd entry's matchCondition with
// protect.resources: the CRDs of core.navique.com and of every listed
// group a CRD can serve (a name with a dot; "" and apps cannot), once
// each, so that deleting the CRD of an opted-in kind reaches the CRD
// guard (docs/contract.md rules 12 and 21).
func TestProtectResourcesCRDGroups(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{SetJSON: []string{`protect.resources=[{"group":"","resources":["persistentvolumeclaims"]},{"group":"apps","resources":["statefulsets"]},{"group":"example.com","resources":["gizmos"]},{"group":"example.com","resources":["gadgets"]},{"group":"db.example.org","resources":["clusters"]}]`}})
	vwc := convert[admissionregistrationv1.ValidatingWebhookConfiguration](t, framework.Find(objs, "ValidatingWebhookConfiguration", "lockguard"))
	i := slices.IndexFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name == "crd.lockguard.core.navique.com"
	})
	if i < 0 {
		t.Fatal("no crd entry")
	}
	want := []admissionregistrationv1.MatchCondition{{Name: "core-navique-com-group", Expression: "oldObject.spec.group in ['core.navique.com', 'example.com', 'db.example.org']"}}
	if diff := cmp.Diff(want, vwc.Webhooks[i].MatchConditions); diff != "" {
		t.Errorf("crd entry's matchConditions: -want, +got:\n%s", diff)
	}
}
