package contract_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestPluginDryRun: the plugin's --dry-run and kubectl lock unlock NAME,
// against the real API server and lockguard, as real users. kubectl lock
// --dry-run=server (the create sent with dryRun=All, lockguard's create
// check answering) and --dry-run=client create no Lock, and the Stack
// stays deletable. kubectl unlock and kubectl lock unlock with
// --dry-run=server leave the Lock, and the Stack's delete stays denied.
// A user bound to edit but not lockguard-unlock is refused, dry run or
// not, with the error naming the verb and the ClusterRole; bound to
// lockguard-unlock, kubectl lock unlock NAME deletes the Lock and returns
// once the Stack's delete is allowed, and deletes a selector Lock by name
// too. kubectl lock exception create --dry-run=server creates no
// LockException.
func TestPluginDryRun(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "dryrun")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	wantLocks := func(what string, want ...string) {
		t.Helper()
		if diff := cmp.Diff(want, lockNames(t, ns), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("Locks after %s: -want, +got:\n%s", what, diff)
		}
	}

	r := kubectlLock(t, "", "stack/forge", "-n", ns, "--reason", "prod", "--dry-run=server")
	if want := "lock.core.navique.com/stack-forge created (server dry run)\n"; r.err != nil || r.stdout != want {
		t.Errorf("kubectl lock --dry-run=server: err %v, stdout %q, want %q", r.err, r.stdout, want)
	}
	r = kubectlLock(t, "", "stack/forge", "-n", ns, "--reason", "prod", "--dry-run=server", "-o", "yaml")
	var printed lockv1alpha1.Lock
	if err := yaml.Unmarshal([]byte(r.stdout), &printed); r.err != nil || err != nil || printed.Name != "stack-forge" ||
		printed.Spec.TargetRef.Kind != "Stack" || printed.Spec.Level != lockv1alpha1.LevelCanNotDelete {
		t.Errorf("kubectl lock --dry-run=server -o yaml: err %v, printed %q (want the Lock as the API server would store it, defaulted)", r.err, r.stdout)
	}
	r = kubectlLock(t, "", "--selector", "tier=db", "-n", ns, "--dry-run=client")
	if want := "lock.core.navique.com/tier-db created (dry run)\n"; r.err != nil || r.stdout != want {
		t.Errorf("kubectl lock --selector --dry-run=client: err %v, stdout %q, want %q", r.err, r.stdout, want)
	}
	wantLocks("kubectl lock --dry-run")
	if err := dryRunDelete(t, framework.StackGVK, ns, "forge"); err != nil {
		t.Errorf("dry-run delete of the Stack after kubectl lock --dry-run: %v, want allowed", err)
	}

	if r := kubectlLock(t, "", "stack/forge", "-n", ns, "--reason", "prod"); r.err != nil {
		t.Fatalf("kubectl lock: %v", r.err)
	}
	lock := getLock(t, ns, "stack-forge")
	if lock.Status.Scope != "Stack/forge" {
		t.Errorf("status.scope of the Lock kubectl lock created: %q, want Stack/forge", lock.Status.Scope)
	}
	sel := kube.CreateLock(t, framework.NewSelectorLock(ns, "tier-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}))
	kube.WaitActive(t, sel)

	// Users: edit (with lockguard-view and -edit aggregated into it), and
	// edit with lockguard-unlock.
	editor := []string{"--as", "dry-editor", "--as-group", "system:authenticated"}
	holder := []string{"--as", "dry-holder", "--as-group", "system:authenticated"}
	kube.EditUser(t, suite.env.Config, ns, "dry-editor", &lockv1alpha1.LockList{})
	kube.EditUser(t, suite.env.Config, ns, "dry-holder", &lockv1alpha1.LockList{})
	bind(t, ns, "dry-holder", "ClusterRole", lockv1alpha1.UnlockRole)
	// The plugin reads the Stack, and kubectl unlock and kubectl lock
	// unlock check with a dry-run DELETE that it can be deleted: the edit
	// role does not cover the test kinds.
	stacks := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stacks"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "list", "delete"},
	}}}
	if err := kube.Client.Create(t.Context(), stacks); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "dry-editor", "Role", stacks.Name)
	bind(t, ns, "dry-holder", "Role", stacks.Name)

	shown := "Lock stack-forge in namespace " + ns + ":\n" +
		"LOCK          SCOPE         LEVEL          STATUS   PROTECTED   REASON\n" +
		"stack-forge   Stack/forge   CanNotDelete   Active   1           prod\n"
	r = kubectlLock(t, "", append([]string{"unlock", "stack-forge", "-n", ns, "--dry-run=server"}, holder...)...)
	if want := shown + "lock.core.navique.com/stack-forge deleted (server dry run)\n"; r.err != nil || r.stdout != want {
		t.Errorf("kubectl lock unlock --dry-run=server as a lockguard-unlock user: err %v; stdout -want, +got:\n%s", r.err, cmp.Diff(want, r.stdout))
	}
	r = kubectlUnlock(t, "", append([]string{"stack/forge", "-n", ns, "--dry-run=server"}, holder...)...)
	if want := "lock.core.navique.com/stack-forge deleted (server dry run)\n"; r.err != nil || !strings.HasSuffix(r.stdout, want) || strings.Contains(r.stdout, "[y/N]") {
		t.Errorf("kubectl unlock --dry-run=server as a lockguard-unlock user: err %v, stdout %q; want no question and the last line %q", r.err, r.stdout, want)
	}
	wantLocks("kubectl lock unlock and kubectl unlock --dry-run=server", "stack-forge", "tier-db")
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "forge"), lock)

	// Without the verb unlock: refused, dry run or not, naming the role.
	wantRole := lockv1alpha1.UnlockDeleteMessage(ns, "stack-forge") + "\nYou lack the verb \"unlock\" on this Lock: ask for a RoleBinding to the ClusterRole lockguard-unlock in its namespace " +
		"(or a Role granting \"unlock\" on this Lock alone, with resourceNames)"
	for _, args := range [][]string{
		{"unlock", "stack-forge", "-n", ns, "--yes"},
		{"unlock", "stack-forge", "-n", ns, "--dry-run=server"},
	} {
		r = kubectlLock(t, "", append(args, editor...)...)
		if !apierrors.IsForbidden(r.err) || !strings.HasSuffix(errText(r.err), wantRole) {
			t.Errorf("kubectl lock %v as an edit user: %v\nwant forbidden, ending with %q", args, r.err, wantRole)
		}
	}
	r = kubectlUnlock(t, "", append([]string{"stack/forge", "-n", ns, "--dry-run=server"}, editor...)...)
	if !apierrors.IsForbidden(r.err) || !strings.HasSuffix(errText(r.err), wantRole) {
		t.Errorf("kubectl unlock --dry-run=server as an edit user: %v\nwant forbidden, ending with %q", r.err, wantRole)
	}
	wantLocks("the edit user's unlocks", "stack-forge", "tier-db")

	// Break-glass, as a dry run: no LockException.
	r = kubectlLock(t, "", "exception", "create", "stack/forge", "-n", ns, "--reason", "INC-1", "--dry-run=server")
	if r.err != nil || !strings.Contains(r.stdout, " created (server dry run): ") {
		t.Errorf("kubectl lock exception create --dry-run=server: err %v, stdout %q", r.err, r.stdout)
	}
	var exceptions lockv1alpha1.LockExceptionList
	if err := kube.Client.List(t.Context(), &exceptions); err != nil {
		t.Fatal(err)
	}
	for _, e := range exceptions.Items {
		if e.Namespace == ns {
			t.Errorf("LockException %s exists after a dry-run create", e.Name)
		}
	}

	// For real, by name: the targetRef Lock, then the selector Lock.
	r = kubectlLock(t, "", append([]string{"unlock", "stack-forge", "-n", ns, "--yes"}, holder...)...)
	want := shown + "lock.core.navique.com/stack-forge deleted\n" +
		"stack.core.navique.com/forge in namespace " + ns + " is unlocked: it can be deleted\n"
	if r.err != nil || r.stdout != want {
		t.Errorf("kubectl lock unlock as a lockguard-unlock user: err %v; stdout -want, +got:\n%s", r.err, cmp.Diff(want, r.stdout))
	}
	// Returned means allowed: no polling here.
	if err := dryRunDelete(t, framework.StackGVK, ns, "forge"); err != nil {
		t.Errorf("dry-run delete of the Stack after kubectl lock unlock: %v", err)
	}
	r = kubectlLock(t, "", append([]string{"unlock", "tier-db", "-n", ns, "--yes"}, holder...)...)
	if r.err != nil || !strings.HasSuffix(r.stdout, "lock.core.navique.com/tier-db deleted\n") {
		t.Errorf("kubectl lock unlock of a selector Lock: err %v, stdout %q", r.err, r.stdout)
	}
	wantLocks("kubectl lock unlock")
}
