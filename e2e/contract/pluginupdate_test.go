package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/controller"
	"github.com/navique/lockguard/e2e/framework"
)

// checkPluginUpdate: kubectl lock update as the users of checkUnlock in
// ns (docs/contract.md rule 18). The edit user raises a Lock's level (a
// merge patch with the resourceVersion read: a status write of
// lockguard's in between is a Conflict, read again); lowering it back is
// said to need the verb unlock before it is sent, refused by decider, and
// the error names lockguard-unlock; the Lock keeps its level. The
// lockguard-unlock user's server-side dry run of the same is allowed and
// changes nothing; its real one lowers the Lock.
func checkPluginUpdate(t *testing.T, ns, decider string) {
	t.Helper()
	l := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lk-update"},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "app"}}}
	if err := kube.Client.Create(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	editor := []string{"--as", "unlock-editor", "--as-group", "system:authenticated"}
	holder := []string{"--as", "unlock-holder", "--as-group", "system:authenticated"}
	update := func(as []string, args ...string) result {
		t.Helper()
		return kubectlLock(t, "", append(append([]string{"update", "lk-update", "-n", ns}, args...), as...)...)
	}
	wantLevel := func(what string, want lockv1alpha1.LockLevel) {
		t.Helper()
		if got := getLock(t, ns, "lk-update").Spec.Level; got != want {
			t.Errorf("%s: the Lock's level is %s, want %s", what, got, want)
		}
	}

	r := update(editor, "--level", "ReadOnly")
	want := "lock.core.navique.com/lk-update patched\n  level: CanNotDelete -> ReadOnly\n" +
		"lockguard reports the change in the Lock's status: kubectl lock show lk-update -n " + ns + "\n"
	if r.err != nil || r.stdout != want {
		t.Errorf("kubectl lock update --level ReadOnly as an edit user: err %v; stdout -want, +got:\n%s", r.err, cmp.Diff(want, r.stdout))
	}
	wantLevel("raised by an edit user", lockv1alpha1.LevelReadOnly)

	note := "Note: this lowers the level of Lock " + ns + "/lk-update, which needs the verb \"unlock\" on it besides patch " +
		"(the ClusterRole lockguard-unlock, which edit and admin do not include)\n"
	r = update(editor, "--level", "CanNotDelete")
	wantErr := decider + lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredLevel, ns, "lk-update") +
		"\nYou lack the verb \"unlock\" on this Lock: ask for a RoleBinding to the ClusterRole lockguard-unlock in its namespace " +
		"(or a Role granting \"unlock\" on this Lock alone, with resourceNames)"
	if r.err == nil || !strings.HasSuffix(r.err.Error(), wantErr) || r.stderr != note || r.stdout != "" {
		t.Errorf("kubectl lock update --level CanNotDelete as an edit user: err %v, stdout %q, stderr %q\nwant an error ending with %q and the note %q",
			r.err, r.stdout, r.stderr, wantErr, note)
	}
	wantLevel("lowered by an edit user, refused", lockv1alpha1.LevelReadOnly)

	r = update(holder, "--level", "CanNotDelete", "--dry-run=server")
	if want := "lock.core.navique.com/lk-update patched (server dry run)\n  level: ReadOnly -> CanNotDelete\n"; r.err != nil || r.stdout != want || r.stderr != note {
		t.Errorf("kubectl lock update --dry-run=server as a lockguard-unlock user: err %v, stdout %q, stderr %q; want stdout %q", r.err, r.stdout, r.stderr, want)
	}
	wantLevel("lowered by a server-side dry run", lockv1alpha1.LevelReadOnly)
	if r = update(holder, "--level", "CanNotDelete"); r.err != nil {
		t.Errorf("kubectl lock update --level CanNotDelete as a lockguard-unlock user: %v", r.err)
	}
	wantLevel("lowered by a lockguard-unlock user", lockv1alpha1.LevelCanNotDelete)
}

// TestLockAuditShowUpdate: kubectl lock --audit creates a Lock in Audit
// enforcement and returns once lockguard reports it live (Ready, reason
// Audit: it is never active), saying it refuses nothing; the Stack's
// dry-run DELETE is allowed; kubectl lock show says Audit with the
// product's message; kubectl lock update --enforce (free, rule 20) makes
// it refuse: the dry-run DELETE is then denied by it, and kubectl lock
// show says Active.
func TestLockAuditShowUpdate(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "audit-plugin")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")

	r := kubectlLock(t, "", "stack/forge", "-n", ns, "--audit", "--reason", "trying")
	if r.err != nil {
		t.Fatalf("kubectl lock --audit: %v", r.err)
	}
	l := getLock(t, ns, "stack-forge")
	if want := "lock.core.navique.com/stack-forge created\n" +
		"the Lock stack-forge on Stack/forge in namespace " + ns + " is in Audit enforcement: it refuses nothing; each request it would refuse " +
		"(deleting what it covers) is allowed with a warning and recorded in its status.lastWouldDeny (kubectl lock show stack-forge -n " + ns + "); " +
		"kubectl lock update stack-forge -n " + ns + " --enforce makes it refuse\n"; r.stdout != want {
		t.Errorf("kubectl lock --audit: stdout -want, +got:\n%s", cmp.Diff(want, r.stdout))
	}
	if l.Spec.Enforcement != lockv1alpha1.EnforcementAudit || l.Status.Active {
		t.Errorf("the Lock kubectl lock --audit made: enforcement %q, active %v; want Audit, not active", l.Spec.Enforcement, l.Status.Active)
	}
	if err := dryRunDelete(t, framework.StackGVK, ns, "forge"); err != nil {
		t.Errorf("a dry-run DELETE of the Stack under the audit Lock: %v, want allowed", err)
	}
	r = kubectlLock(t, "", "show", "stack-forge", "-n", ns)
	if want := "\nStatus:          Audit: " + controller.AuditMessage(l) + "\n"; r.err != nil || !strings.Contains(r.stdout, want) ||
		!strings.Contains(r.stdout, "\nEnforcement:     Audit (it refuses nothing") {
		t.Errorf("kubectl lock show of the audit Lock: err %v, stdout:\n%s\nwant it to hold %q", r.err, r.stdout, want)
	}

	r = kubectlLock(t, "", "update", "stack-forge", "-n", ns, "--enforce")
	if r.err != nil || r.stderr != "" || !strings.HasPrefix(r.stdout, "lock.core.navique.com/stack-forge patched\n  enforcement: Audit -> Enforce\n") {
		t.Fatalf("kubectl lock update --enforce: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
	l = getLock(t, ns, "stack-forge")
	framework.Eventually(t, framework.DefaultTimeout, "the dry-run DELETE denied by the enforced Lock", func(context.Context) error {
		err := dryRunDelete(t, framework.StackGVK, ns, "forge")
		if err == nil || err.Error() != kube.DenialError(l) {
			return fmt.Errorf("dry-run DELETE: %v", err)
		}
		return nil
	})
	kube.WaitActive(t, l)
	if r = kubectlLock(t, "", "show", "stack-forge", "-n", ns); r.err != nil || !strings.Contains(r.stdout, "\nStatus:          Active: ") ||
		!strings.Contains(r.stdout, "\nEnforcement:     Enforce\n") {
		t.Errorf("kubectl lock show of the enforced Lock: err %v, stdout:\n%s", r.err, r.stdout)
	}
}
