package contract_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// TestPluginSelector: kubectl lock --selector and --all create selector
// Locks and return once they are active, kubectl lock list shows their
// scope, and kubectl lock why agrees with the API server on a covered
// object, a relabelled one and the namespace, naming the selector Locks.
func TestPluginSelector(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "plugsel")
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	createLabelledStack(t, ns, "web", map[string]string{"tier": "web"})

	r := kubectlLock(t, "", "--selector", "tier=db", "-n", ns, "--reason", "Customer data")
	if r.err != nil {
		t.Fatalf("kubectl lock --selector: %v", r.err)
	}
	want := "lock.core.navique.com/tier-db created\n" +
		"the resources of namespace " + ns + " that match tier=db, now or later, are locked: their deletion is denied until the Lock tier-db is deleted\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("kubectl lock --selector stdout: -want, +got:\n%s", diff)
	}
	db := getLock(t, ns, "tier-db")
	// Returned means enforced: no polling here.
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "db"), db)
	if err := dryRunDelete(t, framework.StackGVK, ns, "web"); err != nil {
		t.Errorf("dry-run delete of Stack web (tier=web): %v, want it allowed", err)
	}
	if r := kubectlLock(t, "", "stack/db", "--all", "-n", ns); r.err == nil || r.err.Error() != "give exactly one of TYPE/NAME, --selector LABELS or --all" {
		t.Errorf("kubectl lock stack/db --all: err %v, want a refusal", r.err)
	}

	r = kubectlLock(t, "", "list", "-n", ns)
	if r.err != nil {
		t.Fatalf("kubectl lock list: %v", r.err)
	}
	wantList := "SCOPE              LOCK      LEVEL          STATUS   PROTECTED   LAST DENIED   REASON\n" +
		"selector:tier=db   tier-db   CanNotDelete   Active   1           <none>        Customer data\n"
	if diff := cmp.Diff(wantList, r.stdout); diff != "" {
		t.Errorf("kubectl lock list: -want, +got:\n%s", diff)
	}

	w := kubectlWhy(t, "stack/db", "-n", ns)
	wantAgree(t, "why stack/db", w, dryRunDelete(t, framework.StackGVK, ns, "db"))
	if got := lockRows(w.Direct); !cmp.Equal(got, []string{ns + "/tier-db selector:tier=db Active"}) {
		t.Errorf("why stack/db: direct Locks %q, want the selector Lock", got)
	}
	w = kubectlWhy(t, "stack/web", "-n", ns)
	wantAgree(t, "why stack/web", w, dryRunDelete(t, framework.StackGVK, ns, "web"))

	if r := kubectlLock(t, "", "--all", "-n", ns); r.err != nil {
		t.Fatalf("kubectl lock --all: %v", r.err)
	}
	all := getLock(t, ns, "all")
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "web"), all)
	w = kubectlWhy(t, "namespace/"+ns)
	wantAgree(t, "why namespace", w, kube.Client.Delete(t.Context(), namespace(ns), client.DryRunAll))
}
