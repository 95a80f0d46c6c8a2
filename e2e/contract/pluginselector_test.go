package contract_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// TestPluginSelector: kubectl lock --selector and --all create selector
// Locks and return once they are active, kubectl lock list shows their
// scope, level and count, kubectl lock why agrees with the API server on a
// covered object, an uncovered one and the namespace, naming the selector
// Locks and which labels they match, and kubectl unlock deletes no
// selector Lock: it names them and fails, and the object stays protected.
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
	wantList := "SCOPE              LOCK      LEVEL          STATUS   EXPIRES   PROTECTED   LAST DENIED   REASON\n" +
		"selector:tier=db   tier-db   CanNotDelete   Active   <none>    1           <none>        Customer data\n"
	if diff := cmp.Diff(wantList, r.stdout); diff != "" {
		t.Errorf("kubectl lock list: -want, +got:\n%s", diff)
	}

	w := kubectlWhy(t, "stack/db", "-n", ns)
	wantAgree(t, "why stack/db", w, dryRunDelete(t, framework.StackGVK, ns, "db"))
	if got := lockRows(w.Direct); !cmp.Equal(got, []string{ns + "/tier-db selector:tier=db Active"}) {
		t.Errorf("why stack/db: direct Locks %q, want the selector Lock", got)
	}
	wantSelectors := []whySelector{{Name: "tier-db", Selector: "selector:tier=db", Level: "CanNotDelete", Covers: true,
		Requirements: []whyRequirement{{Requirement: "tier=db", Label: "tier=db", Met: true}}}}
	if diff := cmp.Diff(wantSelectors, w.Selectors); diff != "" {
		t.Errorf("why stack/db: selectors -want, +got:\n%s", diff)
	}
	if w.Update == nil || w.Update.Frozen || len(w.Update.Locks) != 0 {
		t.Errorf("why stack/db: update %+v, want not frozen (tier-db is CanNotDelete)", w.Update)
	}
	w = kubectlWhy(t, "stack/web", "-n", ns)
	wantAgree(t, "why stack/web", w, dryRunDelete(t, framework.StackGVK, ns, "web"))
	wantSelectors = []whySelector{{Name: "tier-db", Selector: "selector:tier=db", Level: "CanNotDelete",
		Requirements: []whyRequirement{{Requirement: "tier=db", Label: "tier=web"}}}}
	if diff := cmp.Diff(wantSelectors, w.Selectors); diff != "" {
		t.Errorf("why stack/web: selectors -want, +got:\n%s", diff)
	}

	// unlock never deletes a selector Lock, even with --yes, nor the
	// targetRef Lock beside it: it names them and fails.
	if r := kubectlLock(t, "", "stack/db", "-n", ns); r.err != nil {
		t.Fatalf("kubectl lock stack/db: %v", r.err)
	}
	r = kubectlUnlock(t, "", "stack/db", "-n", ns, "--yes")
	wantOut := "Selector Locks covering stack.core.navique.com/db in namespace " + ns + " (they protect other resources too):\n" +
		"LOCK      SCOPE              LEVEL          STATUS   PROTECTED   REASON\n" +
		"tier-db   selector:tier=db   CanNotDelete   Active   1           Customer data\n"
	wantErr := "no Lock deleted, not even the Lock(s) [stack-db] that target it: kubectl unlock never deletes a selector Lock, which protects other resources too; " +
		"if nothing else needs them, delete the selector Lock(s) by name (kubectl delete lock tier-db -n " + ns + "), then run kubectl unlock again"
	if diff := cmp.Diff(wantOut, r.stdout); errText(r.err) != wantErr || diff != "" {
		t.Errorf("kubectl unlock stack/db: error\n  %v\nwant\n  %s\nstdout -want, +got:\n%s", r.err, wantErr, diff)
	}
	if diff := cmp.Diff([]string{"stack-db", "tier-db"}, lockNames(t, ns)); diff != "" {
		t.Errorf("Locks after kubectl unlock stack/db: -want, +got:\n%s", diff)
	}
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "db"), getLock(t, ns, "stack-db"), db)

	if r := kubectlLock(t, "", "--all", "-n", ns); r.err != nil {
		t.Fatalf("kubectl lock --all: %v", r.err)
	}
	all := getLock(t, ns, "all")
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "web"), all)
	w = kubectlWhy(t, "stack/web", "-n", ns)
	wantAgree(t, "why stack/web under --all", w, dryRunDelete(t, framework.StackGVK, ns, "web"))
	if got := lockRows(w.Direct); !cmp.Equal(got, []string{ns + "/all <all> Active"}) {
		t.Errorf("why stack/web under --all: direct Locks %q, want the Lock all", got)
	}
	if len(w.Selectors) != 2 || w.Selectors[0].Name != "all" || !w.Selectors[0].Covers || len(w.Selectors[0].Requirements) != 0 {
		t.Errorf("why stack/web under --all: selectors %+v, want all (covering, no requirement) and tier-db", w.Selectors)
	}
	// A resource covered by a selector Lock alone: unlock refuses too.
	r = kubectlUnlock(t, "y\n", "stack/web", "-n", ns)
	if want := "no Lock deleted: kubectl unlock never deletes a selector Lock, which protects other resources too; " +
		"if nothing else needs them, delete the selector Lock(s) by name (kubectl delete lock all -n " + ns + "), then run kubectl unlock again"; errText(r.err) != want {
		t.Errorf("kubectl unlock stack/web: error\n  %v\nwant\n  %s", r.err, want)
	}
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "web"), all)
	w = kubectlWhy(t, "namespace/"+ns)
	wantAgree(t, "why namespace", w, kube.Client.Delete(t.Context(), namespace(ns), client.DryRunAll))
}
