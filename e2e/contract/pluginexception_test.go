package contract_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestPluginException (docs/contract.md rule 20): kubectl lock exception
// create, run as a lockguard-break-glass user, creates a LockException
// for that user (from the SelfSubjectReview) on the Lock that covers the
// Stack, and the user can then delete the Stack; another user still
// cannot. A user without break-glass is refused, and the error names
// lockguard-break-glass. list shows the exception; delete revokes it.
func TestPluginException(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	ns := kube.NewNamespace(t, "pluginx")
	kube.CreateObject(t, framework.StackGVK, ns, "app")
	lk := kube.CreateLock(t, framework.NewLock(ns, "lk-x", "Stack", "app", "production"))
	stacks := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stack-admin"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "list", "delete"}},
		{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"lockexceptions"}, Verbs: []string{"create"}},
	}}
	if err := kube.Client.Create(ctx, stacks); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"px-holder", "px-other"} {
		bind(t, ns, u, "Role", stacks.Name)
		bind(t, ns, u, "ClusterRole", lockv1alpha1.ViewRole)
	}
	bind(t, ns, "px-holder", "ClusterRole", lockv1alpha1.BreakGlassRole)
	as := func(user string) []string { return []string{"--as", user, "--as-group", "system:authenticated"} }
	other, _ := userClient(t, "px-other")
	holder, _ := userClient(t, "px-holder")

	var created string
	framework.Eventually(t, framework.DefaultTimeout, "kubectl lock exception create as px-holder", func(context.Context) error {
		r := kubectlLock(t, "", append([]string{"exception", "create", "stack/app", "-n", ns, "--reason", "INC-7", "--for", "30m"}, as("px-holder")...)...)
		if r.err != nil {
			return r.err
		}
		if !strings.Contains(r.stdout, " created: px-holder may delete stack.core.navique.com/app through Lock(s) [lk-x] until ") {
			return fmt.Errorf("stdout %q", r.stdout)
		}
		created = strings.TrimPrefix(strings.Fields(r.stdout)[0], "lockexception.core.navique.com/")
		return nil
	})
	if created == "" || !strings.HasPrefix(created, "stack-app-") {
		t.Fatalf("created exception %q, want a name generated from stack-app-", created)
	}
	e := &lockv1alpha1.LockException{}
	if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: created}, e); err != nil || e.Spec.User != "px-holder" ||
		len(e.Spec.Operations) != 1 || e.Spec.Operations[0] != lockv1alpha1.ExceptionDelete {
		t.Errorf("the exception: %v %+v; want user px-holder, DELETE", err, e.Spec)
	}

	r := kubectlLock(t, "", append([]string{"exception", "create", "stack/app", "-n", ns, "--reason", "INC-7"}, as("px-other")...)...)
	if r.err == nil || !apierrors.IsForbidden(errors.Unwrap(r.err)) || !strings.Contains(r.err.Error(), "ClusterRole "+lockv1alpha1.BreakGlassRole) {
		t.Errorf("kubectl lock exception create without break-glass: %v; want Forbidden naming %s", r.err, lockv1alpha1.BreakGlassRole)
	}
	r = kubectlLock(t, "", "exception", "list", "-n", ns)
	if r.err != nil || !strings.Contains(r.stdout, created) || !strings.Contains(r.stdout, "Stack/app   delete       px-holder") {
		t.Errorf("kubectl lock exception list: %v\n%s", r.err, r.stdout)
	}

	kube.WantDenied(t, other.Delete(ctx, framework.Object(framework.StackGVK, ns, "app"), client.DryRunAll), lk)
	framework.Eventually(t, framework.DefaultTimeout, "px-holder deletes the Stack through the exception", func(ctx context.Context) error {
		return holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "app"), client.DryRunAll)
	})

	if r = kubectlLock(t, "", "exception", "delete", created, "-n", ns); r.err != nil {
		t.Errorf("kubectl lock exception delete: %v", r.err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the revoked exception lets nothing through", func(ctx context.Context) error {
		err := holder.Delete(ctx, framework.Object(framework.StackGVK, ns, "app"), client.DryRunAll)
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("%v, want denied", err)
		}
		return nil
	})
}
