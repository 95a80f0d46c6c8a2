package contract_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestPluginReadOnly: kubectl lock --read-only creates a ReadOnly Lock,
// of a resource or of a selector, and returns once lockguard reports its
// freeze in force (no polling after it); kubectl lock list shows
// "ReadOnly (in force)" and kubectl lock why says the resource's updates
// are frozen, in force. The same command without --read-only keeps the
// ReadOnly Lock, with a warning. It needs lockguard's ReadOnly
// implementation (the reconciler's ReadOnly condition).
func TestPluginReadOnly(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "plugro")
	deleteLocksAtEnd(t, ns)
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	createLabelledStack(t, ns, "cache", map[string]string{"tier": "cache"})

	r := kubectlLock(t, "", "stack/db", "-n", ns, "--read-only", "--reason", "Change freeze")
	want := "lock.core.navique.com/stack-db created\n" +
		"stack.core.navique.com/db in namespace " + ns + " is locked read-only: its deletion, and changes to its spec and metadata (except by exempt principals), are denied until the Lock stack-db is deleted\n"
	if diff := cmp.Diff(want, r.stdout); r.err != nil || diff != "" {
		t.Fatalf("kubectl lock --read-only: err %v; stdout -want, +got:\n%s", r.err, diff)
	}
	l := getLock(t, ns, "stack-db")
	// Returned means in force: no polling here.
	if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReadOnly); l.Spec.Level != lockv1alpha1.LevelReadOnly || !l.Status.Active ||
		c == nil || c.Status != metav1.ConditionTrue || c.Reason != lockv1alpha1.ReasonInForce {
		t.Errorf("Lock stack-db after kubectl lock --read-only: level %q, status %+v; want ReadOnly, active, ReadOnly=True InForce", l.Spec.Level, l.Status)
	}
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "db"), l)

	r = kubectlLock(t, "", "--selector", "tier=cache", "-n", ns, "--read-only", "--name", "freeze-cache")
	want = "lock.core.navique.com/freeze-cache created\n" +
		"the resources of namespace " + ns + " that match tier=cache, now or later, are locked read-only: their deletion, and changes to their spec and metadata (except by exempt principals), are denied until the Lock freeze-cache is deleted\n"
	if diff := cmp.Diff(want, r.stdout); r.err != nil || diff != "" {
		t.Fatalf("kubectl lock --selector --read-only: err %v; stdout -want, +got:\n%s", r.err, diff)
	}

	// Again without --read-only: the ReadOnly Lock is kept.
	r = kubectlLock(t, "", "stack/db", "-n", ns, "--reason", "Change freeze")
	want = "lock.core.navique.com/stack-db unchanged\n" +
		"stack.core.navique.com/db in namespace " + ns + " is locked read-only: its deletion, and changes to its spec and metadata (except by exempt principals), are denied until the Lock stack-db is deleted\n"
	if r.err != nil || r.stdout != want || r.stderr != "Warning: the existing Lock's level ReadOnly was kept\n" {
		t.Errorf("kubectl lock stack/db without --read-only: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}

	r = kubectlLock(t, "", "list", "-n", ns)
	wantList := "SCOPE                 LOCK           LEVEL                 STATUS   EXPIRES   PROTECTED   LAST DENIED   REASON\n" +
		"Stack/db              stack-db       ReadOnly (in force)   Active   <none>    1           <none>        Change freeze\n" +
		"selector:tier=cache   freeze-cache   ReadOnly (in force)   Active   <none>    1           <none>        <none>\n"
	if diff := cmp.Diff(wantList, r.stdout); r.err != nil || diff != "" {
		t.Errorf("kubectl lock list: err %v; -want, +got:\n%s", r.err, diff)
	}

	w := kubectlWhy(t, "stack/db", "-n", ns)
	if w.Update == nil || !w.Update.Frozen || !w.Update.InForce || len(w.Update.Locks) != 1 || w.Update.Locks[0].Name != "stack-db" || w.Update.Locks[0].Freeze != "InForce" {
		t.Errorf("why stack/db: update %+v, want frozen by stack-db, in force", w.Update)
	}
}
