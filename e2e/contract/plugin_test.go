package contract_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestLockListUnlock is the plugin end to end: kubectl lock creates Locks
// and returns once they are active, a dry-run DELETE of the target is then
// denied at once; kubectl lock list shows them; kubectl unlock shows the
// Locks of one target, deletes them only once confirmed, and returns once
// a dry-run DELETE is allowed. A Lock of another kind with the same name
// is left alone.
func TestLockListUnlock(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	kube.CreateObject(t, framework.PostgresClusterGVK, ns, "forge")

	r := kubectlLock(t, "", "stack/forge", "-n", ns, "--reason", "Production environment")
	if r.err != nil {
		t.Fatalf("kubectl lock: %v", r.err)
	}
	want := "lock.core.navique.com/stack-forge created\n" +
		"stack.core.navique.com/forge in namespace " + ns + " is locked: its deletion is denied until the Lock stack-forge is deleted\n"
	if diff := cmp.Diff(want, r.stdout); diff != "" {
		t.Errorf("kubectl lock stdout: -want, +got:\n%s", diff)
	}
	l := getLock(t, ns, "stack-forge")
	wantSpec := lockv1alpha1.LockSpec{
		TargetRef:   lockv1alpha1.TargetReference{APIVersion: "core.navique.com/v1beta1", Kind: "Stack", Name: "forge"},
		Level:       lockv1alpha1.LevelCanNotDelete, // the API server's default
		Reason:      "Production environment",
		Enforcement: lockv1alpha1.EnforcementEnforce, // the API server's default
	}
	if diff := cmp.Diff(wantSpec, l.Spec); diff != "" {
		t.Errorf("Lock spec: -want, +got:\n%s", diff)
	}
	if !l.Status.Active {
		t.Errorf("kubectl lock returned before the Lock was active: status %+v", l.Status)
	}
	// Returned means enforced: no polling here.
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "forge"), l)

	// The same Lock again is no error.
	if r := kubectlLock(t, "", "stack/forge", "-n", ns, "--reason", "Production environment"); r.err != nil || r.stdout != strings.Replace(want, "created", "unchanged", 1) {
		t.Errorf("kubectl lock again: err %v, stdout %q", r.err, r.stdout)
	}

	// A second Lock, printed as YAML once active.
	r = kubectlLock(t, "", "stacks/forge", "-n", ns, "--name", "change-freeze", "--reason", "Change freeze", "-o", "yaml")
	if r.err != nil {
		t.Fatalf("kubectl lock -o yaml: %v", r.err)
	}
	var printed lockv1alpha1.Lock
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &printed); err != nil {
		t.Fatalf("kubectl lock -o yaml printed no Lock: %v\n%s", err, r.stdout)
	}
	if printed.Kind != "Lock" || printed.Name != "change-freeze" || printed.Namespace != ns || !printed.Status.Active || printed.Spec.TargetRef.Kind != "Stack" {
		t.Errorf("kubectl lock -o yaml printed %+v", printed)
	}
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "forge"), &printed, l)

	// The PostgresCluster of the same name, and a Lock whose target does not exist.
	if r := kubectlLock(t, "", "PostgresCluster/forge", "-n", ns); r.err != nil {
		t.Fatalf("kubectl lock PostgresCluster/forge: %v", r.err)
	}
	ghost := framework.NewLock(ns, "ghost", "Stack", "ghost", "not created yet")
	if err := kube.Client.Create(t.Context(), ghost); err != nil {
		t.Fatal(err)
	}
	kube.WaitLockStatus(t, ghost, framework.MissingStatus(ghost))

	r = kubectlLock(t, "", "list", "-n", ns)
	wantTable := "" +
		"SCOPE                   LOCK                    LEVEL          STATUS             EXPIRES   PROTECTED   LAST DENIED   REASON\n" +
		"PostgresCluster/forge   postgrescluster-forge   CanNotDelete   Active             <none>    1           <none>        <none>\n" +
		"Stack/forge             change-freeze           CanNotDelete   Active             <none>    1           <none>        Change freeze\n" +
		"Stack/forge             stack-forge             CanNotDelete   Active             <none>    1           <none>        Production environment\n" +
		"Stack/ghost             ghost                   CanNotDelete   MissingReference   <none>    0           <none>        not created yet\n"
	if r.err != nil || r.stdout != wantTable {
		t.Errorf("kubectl lock list: err %v; stdout -want, +got:\n%s", r.err, cmp.Diff(wantTable, r.stdout))
	}
	// -A: other tests' namespaces too, so the columns' widths vary.
	r = kubectlLock(t, "", "list", "-A")
	var rows []string
	for i, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if f := strings.Fields(line); i == 0 || (len(f) > 0 && f[0] == ns) {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	wantRows := []string{
		"NAMESPACE SCOPE LOCK LEVEL STATUS EXPIRES PROTECTED LAST DENIED REASON",
		ns + " PostgresCluster/forge postgrescluster-forge CanNotDelete Active <none> 1 <none> <none>",
		ns + " Stack/forge change-freeze CanNotDelete Active <none> 1 <none> Change freeze",
		ns + " Stack/forge stack-forge CanNotDelete Active <none> 1 <none> Production environment",
		ns + " Stack/ghost ghost CanNotDelete MissingReference <none> 0 <none> not created yet",
	}
	if diff := cmp.Diff(wantRows, rows); r.err != nil || diff != "" {
		t.Errorf("kubectl lock list -A: err %v; header and %s's rows -want, +got:\n%s", r.err, ns, diff)
	}
	for _, format := range []string{"json", "yaml"} {
		r = kubectlLock(t, "", "list", "-n", ns, "-o", format)
		var list struct {
			APIVersion, Kind string
			Items            []lockv1alpha1.Lock
		}
		data := []byte(r.stdout)
		if format == "yaml" {
			var err error
			if data, err = yaml.YAMLToJSON(data); err != nil {
				t.Fatalf("kubectl lock list -o yaml: %v", err)
			}
		}
		if err := json.Unmarshal(data, &list); err != nil || r.err != nil {
			t.Fatalf("kubectl lock list -o %s: err %v, unmarshal: %v", format, r.err, err)
		}
		var got []string
		for _, l := range list.Items {
			got = append(got, fmt.Sprintf("%s %s %s %s/%s %v", l.Kind, l.Namespace, l.Name, l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name, l.Status.Active))
		}
		want := []string{
			"Lock " + ns + " postgrescluster-forge PostgresCluster/forge true",
			"Lock " + ns + " change-freeze Stack/forge true",
			"Lock " + ns + " stack-forge Stack/forge true",
			"Lock " + ns + " ghost Stack/ghost false",
		}
		if list.APIVersion != "v1" || list.Kind != "List" {
			t.Errorf("kubectl lock list -o %s: %s %s, want v1 List", format, list.APIVersion, list.Kind)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("kubectl lock list -o %s: -want, +got:\n%s", format, diff)
		}
	}

	// unlock asks first; anything but y or yes keeps the Locks.
	wantShown := "Locks protecting stack.core.navique.com/forge in namespace " + ns + ":\n" +
		"LOCK            STATUS   REASON\n" +
		"change-freeze   Active   Change freeze\n" +
		"stack-forge     Active   Production environment\n" +
		"Delete 2 Lock(s)? [y/N]: "
	for _, answer := range []string{"n\n", "", "whatever\n"} {
		r = kubectlUnlock(t, answer, "stack/forge", "-n", ns)
		if errText(r.err) != "not confirmed: no Lock deleted (--yes skips the question)" || !strings.HasPrefix(r.stdout, wantShown) {
			t.Errorf("kubectl unlock answered %q: err %v; stdout -want, +got:\n%s", answer, r.err, cmp.Diff(wantShown, r.stdout))
		}
	}
	if diff := cmp.Diff([]string{"change-freeze", "ghost", "postgrescluster-forge", "stack-forge"}, lockNames(t, ns)); diff != "" {
		t.Fatalf("Locks after unlock was not confirmed: -want, +got:\n%s", diff)
	}

	r = kubectlUnlock(t, "y\n", "stack/forge", "-n", ns)
	wantUnlocked := wantShown +
		"lock.core.navique.com/change-freeze deleted\n" +
		"lock.core.navique.com/stack-forge deleted\n" +
		"stack.core.navique.com/forge in namespace " + ns + " is unlocked: it can be deleted\n"
	if r.err != nil || r.stdout != wantUnlocked {
		t.Fatalf("kubectl unlock: err %v; stdout -want, +got:\n%s", r.err, cmp.Diff(wantUnlocked, r.stdout))
	}
	// Returned means allowed: no polling here.
	if err := dryRunDelete(t, framework.StackGVK, ns, "forge"); err != nil {
		t.Errorf("dry-run delete of the unlocked Stack: %v", err)
	}
	kube.WantDenied(t, dryRunDelete(t, framework.PostgresClusterGVK, ns, "forge"), getLock(t, ns, "postgrescluster-forge"))
	if diff := cmp.Diff([]string{"ghost", "postgrescluster-forge"}, lockNames(t, ns)); diff != "" {
		t.Errorf("Locks after unlock stack/forge: -want, +got:\n%s", diff)
	}

	r = kubectlUnlock(t, "", "stack/forge", "-n", ns, "--yes")
	if r.err != nil || r.stdout != "" || r.stderr != "No Locks protect stack.core.navique.com/forge in namespace "+ns+".\n" {
		t.Errorf("kubectl unlock with no Lock: err %v, stdout %q, stderr %q", r.err, r.stdout, r.stderr)
	}
	r = kubectlUnlock(t, "", "postgresclusters.core.navique.com/forge", "-n", ns, "--yes")
	if r.err != nil || strings.Contains(r.stdout, "[y/N]") || !strings.HasSuffix(r.stdout, "postgrescluster.core.navique.com/forge in namespace "+ns+" is unlocked: it can be deleted\n") {
		t.Errorf("kubectl unlock --yes: err %v, stdout %q", r.err, r.stdout)
	}
	if err := dryRunDelete(t, framework.PostgresClusterGVK, ns, "forge"); err != nil {
		t.Errorf("dry-run delete of the unlocked PostgresCluster: %v", err)
	}
}

// TestLockResolvesTypes: every way kubectl spells a type writes the served
// kind into the Lock, with the version the type names or else the
// preferred one (the sample CRDs serve v1alpha1 and v1beta1), and the Lock
// protects its target.
func TestLockResolvesTypes(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	for i, tc := range []struct {
		typ, kind, apiVersion string
	}{
		{"stack", "Stack", "core.navique.com/v1beta1"},
		{"stacks", "Stack", "core.navique.com/v1beta1"},
		{"Stack", "Stack", "core.navique.com/v1beta1"},
		{"STACKS", "Stack", "core.navique.com/v1beta1"},
		{"stacks.core.navique.com", "Stack", "core.navique.com/v1beta1"},
		{"stack.core.navique.com", "Stack", "core.navique.com/v1beta1"},
		{"Stack.core.navique.com", "Stack", "core.navique.com/v1beta1"},
		{"stacks.v1alpha1.core.navique.com", "Stack", "core.navique.com/v1alpha1"},
		{"Stack.v1alpha1.core.navique.com", "Stack", "core.navique.com/v1alpha1"},
		{"postgresclusters", "PostgresCluster", "core.navique.com/v1beta1"},
		{"postgrescluster", "PostgresCluster", "core.navique.com/v1beta1"},
	} {
		name := fmt.Sprintf("t%d", i)
		gvk := framework.StackGVK
		if tc.kind == "PostgresCluster" {
			gvk = framework.PostgresClusterGVK
		}
		kube.CreateObject(t, gvk, ns, name)
		lock := "l" + name
		if r := kubectlLock(t, "", tc.typ+"/"+name, "-n", ns, "--name", lock); r.err != nil {
			t.Errorf("kubectl lock %s/%s: %v", tc.typ, name, r.err)
			continue
		}
		want := lockv1alpha1.TargetReference{APIVersion: tc.apiVersion, Kind: tc.kind, Name: name}
		if diff := cmp.Diff(want, getLock(t, ns, lock).Spec.TargetRef); diff != "" {
			t.Errorf("kubectl lock %s/%s: targetRef -want, +got:\n%s", tc.typ, name, diff)
		}
		kube.WantDenied(t, dryRunDelete(t, gvk, ns, name), getLock(t, ns, lock))
	}
}

// TestLockRefuses: what no Lock can protect is refused with a message that
// says why, and no Lock is created.
func TestLockRefuses(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	kube.CreateObject(t, framework.StackGVK, ns, "other")
	// Another group serving a kind Stack, listed before core.navique.com in
	// discovery: an unqualified "stack" still means core.navique.com's.
	installStackCRD(t, "a.example.com")
	if r := kubectlLock(t, "", "stack/other", "-n", ns, "--name", "taken"); r.err != nil {
		t.Fatalf("kubectl lock stack/other: %v", r.err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"forge"}, `"forge" is not TYPE/NAME (for example stack/forge)`},
		{[]string{"stack/"}, `"stack/" is not TYPE/NAME (for example stack/forge)`},
		// Other groups resolve (the server says whether they are opted in:
		// TestPluginOptInKinds); these names do not exist.
		{[]string{"configmap/forge"}, `configmaps "forge" not found`},
		{[]string{"deployments.apps/forge"}, `deployments.apps "forge" not found`},
		{[]string{"stacks.a.example.com/forge"}, `stacks.a.example.com "forge" not found`},
		{[]string{"lock/taken"}, `a Lock cannot be locked: delete protection applies to the resources Locks protect`},
		{[]string{"lockexception/forge"}, lockv1alpha1.ErrExceptionTarget.Error()},
		// A cluster-scoped kind of the group takes a ClusterLock (pluginclusterlock_test.go): first, it must exist.
		{[]string{"region/forge"}, `regions.core.navique.com "forge" not found`},
		{[]string{"stak/forge"}, `the server doesn't have a resource type "stak"`},
		{[]string{"stack/missing"}, `stacks.core.navique.com "missing" not found`},
		{[]string{"stack/forge", "--name", "taken"}, `lock.core.navique.com "taken" already exists and protects Stack/other: choose another name with --name`},
		{[]string{"stack/other", "--name", "taken", "--read-only"}, `lock.core.navique.com "taken" already exists with level CanNotDelete: raise its level (kubectl lock update taken -n ` + ns + ` --level ReadOnly) or choose another name with --name`},
		{[]string{"stack/forge", "-o", "wide"}, `unable to match a printer suitable for the output format "wide", allowed formats are: json,yaml`},
		{[]string{"list", "-o", "name"}, `unable to match a printer suitable for the output format "name", allowed formats are: json,yaml`},
	} {
		r := kubectlLock(t, "", append(tc.args, "-n", ns)...)
		if got := errText(r.err); got != tc.want {
			t.Errorf("kubectl lock %s: error\n  %s\nwant\n  %s", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	if r := kubectlUnlock(t, "", "deployments.apps/forge", "-n", ns, "--yes"); r.err != nil || !strings.Contains(r.stderr, "No Locks protect deployment.apps/forge in namespace "+ns+".") {
		t.Errorf("kubectl unlock deployments.apps/forge: %v\n%s", r.err, r.stderr)
	}
	if diff := cmp.Diff([]string{"taken"}, lockNames(t, ns)); diff != "" {
		t.Errorf("Locks: -want, +got:\n%s", diff)
	}
}

// TestThroughKubectl runs the built plugins through kubectl itself, as a
// user does: kubectl finds kubectl-lock and kubectl-unlock on PATH, and
// the plugins read KUBECONFIG.
func TestThroughKubectl(t *testing.T) {
	inProcess(t)
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if os.Getenv("LOCKGUARD_REQUIRE_KUBE") == "1" {
			t.Fatalf("kubectl is not on PATH (make puts the pinned one in bin/path): %v", err)
		}
		t.Skipf("kubectl is not on PATH: %v", err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	plugins := t.TempDir()
	for _, p := range []string{"kubectl-lock", "kubectl-unlock"} {
		build := exec.Command("go", "build", "-o", filepath.Join(plugins, p), "./cmd/"+p)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", p, err, out)
		}
	}
	ns := kube.NewNamespace(t, "x")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	run := func(stdin string, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(kubectl, args...)
		cmd.Env = append(os.Environ(), "PATH="+plugins+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kube.Kubeconfig)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		return string(out), err
	}
	if out, err := run("", "lock", "stack/forge", "-n", ns, "--reason", "through kubectl"); err != nil || !strings.Contains(out, "is locked") {
		t.Fatalf("kubectl lock: %v\n%s", err, out)
	}
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "forge"), getLock(t, ns, "stack-forge"))
	if out, err := run("", "lock", "list", "-n", ns); err != nil || !strings.Contains(out, "Stack/forge   stack-forge   CanNotDelete   Active   <none>    1           <none>        through kubectl") {
		t.Errorf("kubectl lock list: %v\n%s", err, out)
	}
	// why is a report: it exits 0 whatever the verdict.
	if out, err := run("", "lock", "why", "stack/forge", "-n", ns); err != nil || !strings.HasPrefix(out, "DELETE stack.core.navique.com/forge in namespace "+ns+": denied by lockguard\n") {
		t.Errorf("kubectl lock why: %v\n%s", err, out)
	}
	if out, err := run("yes\n", "unlock", "stack/forge", "-n", ns); err != nil || !strings.Contains(out, "is unlocked") {
		t.Fatalf("kubectl unlock: %v\n%s", err, out)
	}
	if out, err := run("", "lock", "why", "stack/forge", "-n", ns); err != nil || !strings.HasPrefix(out, "DELETE stack.core.navique.com/forge in namespace "+ns+": allowed by lockguard\n") {
		t.Errorf("kubectl lock why after unlock: %v\n%s", err, out)
	}
	if err := dryRunDelete(t, framework.StackGVK, ns, "forge"); err != nil {
		t.Errorf("dry-run delete after kubectl unlock: %v", err)
	}
	// An error exits 1 with kubectl's wording.
	out, err := run("", "lock", "stack/missing", "-n", ns)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || strings.TrimSpace(out) != `Error from server (NotFound): stacks.core.navique.com "missing" not found` {
		t.Errorf("kubectl lock stack/missing: %v\n%s", err, out)
	}
}

// installStackCRD installs a namespaced kind Stack in another group and
// waits until it is served.
func installStackCRD(t *testing.T, group string) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": "stacks." + group},
		"spec": map[string]any{
			"group": group,
			"names": map[string]any{"kind": "Stack", "listKind": "StackList", "plural": "stacks", "singular": "stack"},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if err := kube.Client.Create(t.Context(), crd); err != nil {
		t.Fatalf("creating CRD stacks.%s: %v", group, err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), crd) })
	framework.Eventually(t, framework.DefaultTimeout, "CRD stacks."+group+" established", func(ctx context.Context) error {
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err != nil {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("conditions %v", conds)
	})
}
