package chart_test

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/navique/lockguard/e2e/framework"
)

// TestRBACFromMarkers checks that the chart grants exactly the rules that
// controller-gen generated into its files/rbac/role.yaml, to the release's
// ServiceAccount.
func TestRBACFromMarkers(t *testing.T) {
	requireHelm(t)
	objs := render(t, framework.Release{Name: "guard", Namespace: "ops"})
	var wantCluster, wantNamespaced []rbacv1.PolicyRule
	for _, o := range readObjects(t, "deploy/chart/lockguard/files/rbac/role.yaml") {
		switch o.GetKind() {
		case "ClusterRole":
			wantCluster = append(wantCluster, convert[rbacv1.ClusterRole](t, o).Rules...)
		case "Role":
			wantNamespaced = append(wantNamespaced, convert[rbacv1.Role](t, o).Rules...)
		}
	}
	// The chart narrows the rule on webhook configurations to the
	// release's own (list and watch by a metadata.name field selector).
	for i, r := range wantCluster {
		if slices.Contains(r.Resources, "validatingwebhookconfigurations") {
			wantCluster[i].ResourceNames = []string{"guard-lockguard"}
		}
	}
	cr := convert[rbacv1.ClusterRole](t, framework.Find(objs, "ClusterRole", "guard-lockguard"))
	if diff := cmp.Diff(wantCluster, cr.Rules); diff != "" {
		t.Errorf("ClusterRole rules differ from files/rbac/role.yaml: -want, +got:\n%s", diff)
	}
	role := convert[rbacv1.Role](t, framework.Find(objs, "Role", "guard-lockguard-leader-election"))
	if diff := cmp.Diff(wantNamespaced, role.Rules); diff != "" {
		t.Errorf("Role rules differ from files/rbac/role.yaml: -want, +got:\n%s", diff)
	}
	if role.Namespace != "ops" {
		t.Errorf("Role namespace %s; want the release's, ops", role.Namespace)
	}
	wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "guard-lockguard", Namespace: "ops"}}
	crb := convert[rbacv1.ClusterRoleBinding](t, framework.Find(objs, "ClusterRoleBinding", "guard-lockguard"))
	rb := convert[rbacv1.RoleBinding](t, framework.Find(objs, "RoleBinding", "guard-lockguard-leader-election"))
	for _, got := range [][]rbacv1.Subject{crb.Subjects, rb.Subjects} {
		if diff := cmp.Diff(wantSubject, got); diff != "" {
			t.Errorf("binding subjects: -want, +got:\n%s", diff)
		}
	}
	for _, r := range slices.Concat(cr.Rules, role.Rules) {
		if slices.Contains(r.Resources, "secrets") {
			t.Errorf("rule %+v grants Secrets; lockguard reads its certificate from a volume", r)
		}
	}
}
