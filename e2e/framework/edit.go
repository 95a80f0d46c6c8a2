package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// EditUser returns a client of cfg's API server acting as user, bound to
// the built-in edit ClusterRole in ns (a RoleBinding made with k's admin
// client), once RBAC lets it list what probe lists there. The edit role
// is filled first from the roles its aggregationRule selects
// (AggregateEdit): the local control planes run no aggregation controller.
func (k *Kube) EditUser(t *testing.T, cfg *rest.Config, ns, user string, probe client.ObjectList) client.Client {
	t.Helper()
	k.AggregateEdit(t)
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-edit"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if err := client.IgnoreAlreadyExists(k.Client.Create(t.Context(), rb)); err != nil {
		t.Fatal(err)
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: k.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, DefaultTimeout, user+" can list in "+ns, func(ctx context.Context) error {
		return c.List(ctx, probe, client.InNamespace(ns))
	})
	return c
}

// AggregateEdit fills the built-in edit ClusterRole from the ClusterRoles
// its aggregationRule selects, as kube-controller-manager's
// clusterrole-aggregation controller does (the local control planes run
// only the garbage collector and the namespace controller); a role that
// has rules already is left alone.
func (k *Kube) AggregateEdit(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	var edit rbacv1.ClusterRole
	if err := k.Client.Get(ctx, client.ObjectKey{Name: "edit"}, &edit); err != nil {
		t.Fatal(err)
	}
	if edit.AggregationRule == nil || len(edit.Rules) > 0 {
		return
	}
	var rules []rbacv1.PolicyRule
	for _, sel := range edit.AggregationRule.ClusterRoleSelectors {
		var roles rbacv1.ClusterRoleList
		if err := k.Client.List(ctx, &roles, client.MatchingLabels(sel.MatchLabels)); err != nil {
			t.Fatal(err)
		}
		for _, r := range roles.Items {
			if r.Name != edit.Name {
				rules = append(rules, r.Rules...)
			}
		}
	}
	edit.Rules = rules
	// A conflict: another test filled it meanwhile.
	if err := k.Client.Update(ctx, &edit); err != nil && !apierrors.IsConflict(err) {
		t.Fatal(err)
	}
}

// WaitGranted waits until the API server's authorizer lets user do what
// the role ref names (each of its resource rules' first verb on its first
// resource), in ns ("" for a ClusterRoleBinding). A binding's create
// returns before RBAC's cache holds it: a request made at once may be
// refused by RBAC rather than by what the test means to check.
func (k *Kube) WaitGranted(t *testing.T, user, ns string, ref rbacv1.RoleRef) {
	t.Helper()
	var rules []rbacv1.PolicyRule
	switch ref.Kind {
	case "Role":
		var r rbacv1.Role
		if err := k.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: ref.Name}, &r); err != nil {
			t.Fatal(err)
		}
		rules = r.Rules
	default:
		var r rbacv1.ClusterRole
		if err := k.Client.Get(t.Context(), client.ObjectKey{Name: ref.Name}, &r); err != nil {
			t.Fatal(err)
		}
		rules = r.Rules
	}
	Eventually(t, DefaultTimeout, user+" granted "+ref.Kind+" "+ref.Name, func(ctx context.Context) error {
		for _, r := range rules {
			if len(r.Resources) == 0 || len(r.APIGroups) == 0 || len(r.Verbs) == 0 {
				continue // non-resource URLs
			}
			resource, sub, _ := strings.Cut(r.Resources[0], "/")
			attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Group: r.APIGroups[0],
				Resource: resource, Subresource: sub, Verb: r.Verbs[0]}
			if len(r.ResourceNames) > 0 {
				attrs.Name = r.ResourceNames[0]
			}
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:authenticated"}, ResourceAttributes: attrs}}
			if err := k.Client.Create(ctx, review); err != nil {
				return err
			}
			if !review.Status.Allowed {
				return fmt.Errorf("%s may not %s %s.%s yet: %s", user, attrs.Verb, r.Resources[0], attrs.Group, review.Status.Reason)
			}
		}
		return nil
	})
}
