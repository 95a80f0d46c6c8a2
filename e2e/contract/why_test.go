package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// why is `kubectl lock why -o json` as the tests read it: the shape the
// plugin documents.
type why struct {
	Target struct {
		Group, Kind, Namespace, Name string
		Labels                       map[string]string
	}
	Deletion struct {
		Blocked   bool
		DecidedBy string
		Locks     []string
		Message   string
		Warnings  []string
	}
	Direct         []whyLock
	Descendants    []whyDescendant
	Inside         []whyLock
	ProtectNothing []whyLock
	Selectors      []whySelector
	ClusterLocks   []whyLock
	Update         *whyUpdate
	Notes          []string
}

type whySelector struct {
	Name, Selector, Level string
	Covers                bool
	Requirements          []whyRequirement
}

type whyRequirement struct {
	Requirement, Label string
	Met                bool
}

type whyUpdate struct {
	Frozen, InForce, GuardDisabled bool
	User                           string
	Asked, Refused                 bool
	Answer                         string
	Locks                          []struct{ Name, Scope, Freeze, Message string }
	Message                        string
}

type whyLock struct {
	Namespace, Name, Target, Status, Reason string
}

type whyDescendant struct {
	Kind, Name string
	OwnerPath  []string
	Locks      []string
	Message    string
}

// kubectlWhy runs `kubectl lock why args... -o json` and decodes it; the
// decoding is strict, so the JSON has exactly the documented members.
func kubectlWhy(t *testing.T, args ...string) why {
	t.Helper()
	r := kubectlLock(t, "", append([]string{"why"}, append(args, "-o", "json")...)...)
	if r.err != nil {
		t.Fatalf("kubectl lock why %s: %v", strings.Join(args, " "), r.err)
	}
	var w why
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &w); err != nil {
		t.Fatalf("kubectl lock why %s -o json: %v\n%s", strings.Join(args, " "), err, r.stdout)
	}
	return w
}

// wantAgree fails the test unless why's verdict is the API server's answer
// to a dry-run DELETE of the same thing (err): denied exactly when why says
// it is blocked, naming the same Locks, with why's message.
func wantAgree(t *testing.T, what string, w why, err error) {
	t.Helper()
	switch {
	case err == nil && w.Deletion.Blocked:
		t.Errorf("%s: the dry-run DELETE was allowed, but why says it is blocked by %v", what, w.Deletion.Locks)
	case err == nil:
	case !apierrors.IsForbidden(err):
		t.Errorf("%s: the dry-run DELETE failed with %v, not a denial", what, err)
	case !w.Deletion.Blocked:
		t.Errorf("%s: the dry-run DELETE was denied (%v), but why says it is not blocked", what, err)
	default:
		if diff := cmp.Diff(deniedNames(err), w.Deletion.Locks); diff != "" {
			t.Errorf("%s: Locks named by the denial (-) and by why (+):\n%s", what, diff)
		}
		if !strings.HasSuffix(err.Error(), "denied the request: "+w.Deletion.Message) {
			t.Errorf("%s: the denial is\n  %v\nwhy's message is\n  %s", what, err, w.Deletion.Message)
		}
	}
}

// deniedNames are the Lock names of a denial ("Lock(s) [a b]").
func deniedNames(err error) []string {
	_, rest, _ := strings.Cut(err.Error(), "Lock(s) [")
	names, _, _ := strings.Cut(rest, "]")
	return strings.Fields(names)
}

// lockRows are Locks as "namespace/name target status".
func lockRows(locks []whyLock) []string {
	rows := []string{}
	for _, l := range locks {
		rows = append(rows, l.Namespace+"/"+l.Name+" "+l.Target+" "+l.Status)
	}
	return rows
}

// createOwned creates an object of a sample kind owned by owners.
func createOwned(t *testing.T, gvk schema.GroupVersionKind, ns, name string, owners ...*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	u := framework.Object(gvk, ns, name)
	var refs []metav1.OwnerReference
	for _, o := range owners {
		refs = append(refs, metav1.OwnerReference{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Name: o.GetName(), UID: o.GetUID()})
	}
	u.SetOwnerReferences(refs)
	if err := kube.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
	return u
}

// TestWhyObjects: for a locked object, an unlocked one, an owner whose
// cascade reaches a locked object two levels down, and a Lock whose target
// does not exist, kubectl lock why says what a dry-run DELETE of the same
// object gets.
func TestWhyObjects(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	deleteLocksAtEnd(t, ns)
	forgeObj := kube.CreateObject(t, framework.StackGVK, ns, "forge")
	kube.CreateObject(t, framework.StackGVK, ns, "free")
	forge := kube.CreateLock(t, framework.NewLock(ns, "stack-forge", "Stack", "forge", "Production environment"))
	freeze := kube.CreateLock(t, framework.NewLock(ns, "change-freeze", "Stack", "forge", ""))
	// forge, locked, also owns a locked database.
	createOwned(t, framework.PostgresClusterGVK, ns, "forge-db", forgeObj)
	dbLock := kube.CreateLock(t, framework.NewLock(ns, "forge-db-lock", "PostgresCluster", "forge-db", "Customer data"))
	// top owns mid owns leaf (locked); top and keeper own shared (locked),
	// which the collector keeps while keeper stays.
	top := kube.CreateObject(t, framework.StackGVK, ns, "top")
	keeper := kube.CreateObject(t, framework.StackGVK, ns, "keeper")
	mid := createOwned(t, framework.PostgresClusterGVK, ns, "mid", top)
	createOwned(t, framework.StackGVK, ns, "leaf", mid)
	createOwned(t, framework.StackGVK, ns, "shared", top, keeper)
	leafLock := kube.CreateLock(t, framework.NewLock(ns, "leaf-lock", "Stack", "leaf", "Keep the data"))
	kube.CreateLock(t, framework.NewLock(ns, "shared-lock", "Stack", "shared", ""))
	kube.WaitActive(t, forge, freeze, dbLock, leafLock)

	// Locked: blocked directly, by the webhook's own code and message.
	w := kubectlWhy(t, "stack/forge", "-n", ns)
	wantAgree(t, "stack/forge", w, dryRunDelete(t, framework.StackGVK, ns, "forge"))
	kube.WantDenied(t, dryRunDelete(t, framework.StackGVK, ns, "forge"), forge, freeze)
	if !w.Deletion.Blocked || w.Deletion.DecidedBy != "webhook" || w.Target.Kind != "Stack" || w.Target.Group != lockv1alpha1.Group || w.Target.Namespace != ns || w.Target.Name != "forge" {
		t.Errorf("why stack/forge: target %+v, deletion %+v", w.Target, w.Deletion)
	}
	wantDirect := []string{ns + "/change-freeze Stack/forge Active", ns + "/stack-forge Stack/forge Active"}
	if diff := cmp.Diff(wantDirect, lockRows(w.Direct)); diff != "" {
		t.Errorf("why stack/forge: direct Locks -want, +got:\n%s", diff)
	}
	wantDesc := []whyDescendant{{
		Kind: "PostgresCluster", Name: "forge-db", OwnerPath: []string{"Stack/forge"},
		Locks: []string{"forge-db-lock"}, Message: framework.DenialMessage(dbLock),
	}}
	if diff := cmp.Diff(wantDesc, w.Descendants); diff != "" {
		t.Errorf("why stack/forge: descendants -want, +got:\n%s", diff)
	}
	kube.WantDenied(t, dryRunDelete(t, framework.PostgresClusterGVK, ns, "forge-db"), dbLock)
	if len(w.Inside) != 0 || len(w.ProtectNothing) != 0 {
		t.Errorf("why stack/forge: inside %v, protectNothing %v; want none", w.Inside, w.ProtectNothing)
	}

	// The same as YAML.
	r := kubectlLock(t, "", "why", "stack/forge", "-n", ns, "-o", "yaml")
	var fromYAML why
	if err := yaml.UnmarshalStrict([]byte(r.stdout), &fromYAML); err != nil || r.err != nil {
		t.Errorf("kubectl lock why -o yaml: err %v, unmarshal %v\n%s", r.err, err, r.stdout)
	} else if diff := cmp.Diff(w, fromYAML); diff != "" {
		t.Errorf("kubectl lock why -o yaml: -json, +yaml:\n%s", diff)
	}

	// The same as text.
	r = kubectlLock(t, "", "why", "stack/forge", "-n", ns)
	wantText := "DELETE stack.core.navique.com/forge in namespace " + ns + ": denied by lockguard\n" +
		"  " + framework.DenialMessage(freeze, forge) + "\n" +
		"\n" +
		"Directly, the Locks that cover it (target it, or select it by its labels):\n" +
		"LOCK            TARGET        STATUS   REASON\n" +
		"change-freeze   Stack/forge   Active   <none>\n" +
		"stack-forge     Stack/forge   Active   Production environment\n" +
		"\n" +
		"Through descendants, the locked objects it owns (through ownerReferences):\n" +
		"DESCENDANT                 OWNED THROUGH   LOCKS\n" +
		"PostgresCluster/forge-db   Stack/forge     forge-db-lock\n" +
		"\n" +
		"Selector Locks: none in namespace " + ns + ".\n" +
		"\n" +
		"UPDATE stack.core.navique.com/forge in namespace " + ns + ": not blocked by lockguard\n" +
		"  no ReadOnly Lock covers it: lockguard never blocks its updates\n" +
		"\n" +
		"Deleting it is denied; delete the Lock(s) [change-freeze stack-forge] first (kubectl unlock).\n" +
		"Without those, its delete would cascade to 1 locked object(s) (Lock(s) [forge-db-lock]), which lockguard's cascade guard denies too.\n"
	if diff := cmp.Diff(wantText, r.stdout); r.err != nil || diff != "" {
		t.Errorf("kubectl lock why stack/forge: err %v; stdout -want, +got:\n%s", r.err, diff)
	}

	// Unlocked: allowed, nothing to say.
	w = kubectlWhy(t, "stacks.core.navique.com/free", "-n", ns)
	wantAgree(t, "stack/free", w, dryRunDelete(t, framework.StackGVK, ns, "free"))
	if w.Deletion.Blocked || len(w.Direct) != 0 || len(w.Descendants) != 0 || len(w.Notes) != 0 || len(w.Selectors) != 0 || w.Update == nil || w.Update.Frozen {
		t.Errorf("why stack/free: %+v", w)
	}

	// The owner: its delete is denied up front by the cascade guard (rule
	// 6), since the collector would delete leaf; shared stays with keeper.
	// lockguard's owner index sees the ownerReferences a moment after
	// their create.
	kube.WaitCascadeDenied(t, framework.StackGVK, ns, "top", kube.CascadeDenialError([]*lockv1alpha1.Lock{leafLock}, "Stack/leaf"))
	kube.WaitCascadeDenied(t, framework.PostgresClusterGVK, ns, "mid", kube.CascadeDenialError([]*lockv1alpha1.Lock{leafLock}, "Stack/leaf"))
	w = kubectlWhy(t, "stack/top", "-n", ns)
	wantAgree(t, "stack/top", w, dryRunDelete(t, framework.StackGVK, ns, "top"))
	wantDesc = []whyDescendant{{
		Kind: "Stack", Name: "leaf", OwnerPath: []string{"Stack/top", "PostgresCluster/mid"},
		Locks: []string{"leaf-lock"}, Message: framework.DenialMessage(leafLock),
	}}
	if diff := cmp.Diff(wantDesc, w.Descendants); diff != "" {
		t.Errorf("why stack/top: descendants -want, +got:\n%s", diff)
	}
	leafErr := dryRunDelete(t, framework.StackGVK, ns, "leaf")
	kube.WantDenied(t, leafErr, leafLock)
	if !w.Deletion.Blocked || !slices.Equal(w.Deletion.Locks, []string{"leaf-lock"}) || len(w.Direct) != 0 ||
		len(w.Notes) != 1 || !strings.Contains(w.Notes[0], "cascade guard (docs/contract.md rule 6)") || !strings.Contains(w.Notes[0], "--cascade=orphan") {
		t.Errorf("why stack/top: deletion %+v, direct %v, notes %q; want denied by the cascade guard, naming leaf-lock, with both ways out", w.Deletion, w.Direct, w.Notes)
	}
	// The middle owner reaches leaf in one step; keeper reaches nothing
	// (shared has another owner, top, that stays).
	if w = kubectlWhy(t, "postgrescluster/mid", "-n", ns); len(w.Descendants) != 1 || !slices.Equal(w.Descendants[0].OwnerPath, []string{"PostgresCluster/mid"}) {
		t.Errorf("why postgrescluster/mid: descendants %+v", w.Descendants)
	}
	wantAgree(t, "postgrescluster/mid", w, dryRunDelete(t, framework.PostgresClusterGVK, ns, "mid"))
	if w = kubectlWhy(t, "stack/keeper", "-n", ns); len(w.Descendants) != 0 {
		t.Errorf("why stack/keeper: descendants %+v; shared is also owned by top", w.Descendants)
	}
	wantAgree(t, "stack/keeper", w, dryRunDelete(t, framework.StackGVK, ns, "keeper"))

	// A Lock whose target does not exist: nothing to delete, for why as
	// for the API server, and why names the waiting Lock.
	ghost := kube.CreateLock(t, framework.NewLock(ns, "ghost", "Stack", "ghost", "not created yet"))
	kube.WaitLockStatus(t, ghost, framework.MissingStatus(ghost))
	r = kubectlLock(t, "", "why", "stack/ghost", "-n", ns)
	if err := dryRunDelete(t, framework.StackGVK, ns, "ghost"); !apierrors.IsNotFound(err) || !apierrors.IsNotFound(r.err) {
		t.Errorf("why stack/ghost: err %v; dry-run DELETE: %v; want both NotFound", r.err, err)
	}
	if want := "stack.core.navique.com/ghost does not exist in namespace " + ns + "; Lock(s) [ghost] target it and will protect it once it is created\n"; r.stderr != want || r.stdout != "" {
		t.Errorf("why stack/ghost: stdout %q, stderr\n  %q\nwant\n  %q", r.stdout, r.stderr, want)
	}
}

// TestWhyNamespaceAndCRD: for a namespace holding Locks, a CRD with a
// locked object and the Lock CRD, kubectl lock why lists the Locks inside
// and says what a dry-run DELETE gets.
func TestWhyNamespaceAndCRD(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	// A kind of its own (a CRD being deleted keeps its name for a while).
	suffix := ns[strings.LastIndex(ns, "-")+1:]
	widget, widgets := "Widget"+suffix, "widget"+suffix+"s"
	installCRD(t, lockv1alpha1.Group, widget, widgets)
	deleteLocksAtEnd(t, ns)
	widgetGVK := schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1", Kind: widget}
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	kube.CreateObject(t, widgetGVK, ns, "w1")
	forge := kube.CreateLock(t, framework.NewLock(ns, "stack-forge", "Stack", "forge", "Production environment"))
	w1 := kube.CreateLock(t, framework.NewLock(ns, "widget-w1", widget, "w1", ""))
	ghost := kube.CreateLock(t, framework.NewLock(ns, "ghost", "Stack", "ghost", ""))
	widgetGhost := kube.CreateLock(t, framework.NewLock(ns, "widget-ghost", widget, "ghost", ""))
	// Settled statuses, so that every why below sees the same.
	kube.WaitActive(t, forge, w1)
	kube.WaitLockStatus(t, ghost, framework.MissingStatus(ghost))
	kube.WaitLockStatus(t, widgetGhost, framework.MissingStatus(widgetGhost))

	w := kubectlWhy(t, "namespace/"+ns)
	nsObj := &unstructured.Unstructured{}
	nsObj.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
	nsObj.SetName(ns)
	wantAgree(t, "namespace/"+ns, w, kube.Client.Delete(t.Context(), nsObj, client.DryRunAll))
	if diff := cmp.Diff([]string{ns + "/stack-forge Stack/forge Active", ns + "/widget-w1 " + widget + "/w1 Active"}, lockRows(w.Inside)); diff != "" {
		t.Errorf("why namespace/%s: inside -want, +got:\n%s", ns, diff)
	}
	if diff := cmp.Diff([]string{ns + "/ghost Stack/ghost MissingReference", ns + "/widget-ghost " + widget + "/ghost MissingReference"}, lockRows(w.ProtectNothing)); diff != "" {
		t.Errorf("why namespace/%s: protectNothing -want, +got:\n%s", ns, diff)
	}
	if w.Target.Kind != "Namespace" || w.Target.Name != ns || w.Target.Namespace != "" {
		t.Errorf("why namespace/%s: target %+v", ns, w.Target)
	}
	if !w.Deletion.Blocked && !slices.ContainsFunc(w.Notes, func(n string) bool { return strings.Contains(n, "deletes its 2 Lock(s)") }) {
		t.Errorf("why namespace/%s: not blocked, notes %q; want the loss explained", ns, w.Notes)
	}
	for _, alias := range []string{"ns/" + ns, "namespaces/" + ns} {
		if got := kubectlWhy(t, alias); !cmp.Equal(got, w) {
			t.Errorf("why %s differs from why namespace/%s:\n%s", alias, ns, cmp.Diff(w, got))
		}
	}

	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	for _, name := range []string{widgets + "." + lockv1alpha1.Group, "locks." + lockv1alpha1.Group} {
		w = kubectlWhy(t, "crd/"+name)
		crd.SetName(name)
		wantAgree(t, "crd/"+name, w, kube.Client.Delete(t.Context(), crd, client.DryRunAll))
		if w.Target.Kind != "CustomResourceDefinition" || w.Target.Name != name {
			t.Errorf("why crd/%s: target %+v", name, w.Target)
		}
		// Other tests' Locks are everywhere: look at this namespace's.
		var inside, nothing []string
		for _, s := range targetsOf(w.Inside) {
			if strings.HasPrefix(s, ns+"/") {
				inside = append(inside, s)
			}
		}
		for _, s := range targetsOf(w.ProtectNothing) {
			if strings.HasPrefix(s, ns+"/") {
				nothing = append(nothing, s)
			}
		}
		wantInside, wantNothing := []string{ns + "/widget-w1 " + widget + "/w1"}, []string{ns + "/widget-ghost " + widget + "/ghost"}
		if strings.HasPrefix(name, "locks.") {
			// Deleting the Lock CRD deletes every Lock, whatever it targets.
			wantInside = []string{ns + "/ghost Stack/ghost", ns + "/stack-forge Stack/forge", ns + "/widget-ghost " + widget + "/ghost", ns + "/widget-w1 " + widget + "/w1"}
			wantNothing = nil
		}
		if diff := cmp.Diff(wantInside, inside); diff != "" {
			t.Errorf("why crd/%s: inside, in %s, -want, +got:\n%s", name, ns, diff)
		}
		if diff := cmp.Diff(wantNothing, nothing); diff != "" {
			t.Errorf("why crd/%s: protectNothing, in %s, -want, +got:\n%s", name, ns, diff)
		}
	}
}

// targetsOf are Locks as "namespace/name target".
func targetsOf(locks []whyLock) []string {
	rows := []string{}
	for _, l := range locks {
		rows = append(rows, l.Namespace+"/"+l.Name+" "+l.Target)
	}
	return rows
}

// TestWhyRefuses: what why cannot answer fails with a message that says
// why.
func TestWhyRefuses(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	suffix := ns[strings.LastIndex(ns, "-")+1:]
	gadgets := "gadget" + suffix + "s.b.example.com"
	installCRD(t, "b.example.com", "Gadget"+suffix, "gadget"+suffix+"s")
	// A CRD of another group is answered: only a ClusterLock protects it.
	if r := kubectlLock(t, "", "why", "crd/"+gadgets); r.err != nil || !strings.Contains(r.stdout, "DELETE customresourcedefinition.apiextensions.k8s.io/"+gadgets+": allowed by lockguard\n") || !strings.Contains(r.stdout, "No ClusterLock names it.\n") {
		t.Errorf("kubectl lock why crd/%s: err %v, stdout %q; want allowed, no ClusterLock", gadgets, r.err, r.stdout)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"forge"}, `"forge" is not TYPE/NAME, namespace/NAME or crd/NAME (for example stack/forge)`},
		// Kinds of other groups are resolved, not refused (the
		// installation decides which it protects: rule 21, TestPluginOptInKinds).
		{[]string{"configmap/forge"}, `configmaps "forge" not found`},
		{[]string{"deployments.apps/forge"}, `deployments.apps "forge" not found`},
		{[]string{"stak/forge"}, `the server doesn't have a resource type "stak"`},
		{[]string{"stack/missing"}, `stacks.core.navique.com "missing" not found`},
		{[]string{"namespace/" + ns + "-missing"}, `namespaces "` + ns + `-missing" not found`},
		{[]string{"crd/missing.core.navique.com"}, `customresourcedefinitions.apiextensions.k8s.io "missing.core.navique.com" not found`},
		{[]string{"stack/forge", "-o", "wide"}, `unable to match a printer suitable for the output format "wide", allowed formats are: json,yaml`},
	} {
		r := kubectlLock(t, "", append([]string{"why"}, append(tc.args, "-n", ns)...)...)
		if got := errText(r.err); got != tc.want {
			t.Errorf("kubectl lock why %s: error\n  %s\nwant\n  %s", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}

// deleteLocksAtEnd deletes the Locks of ns when the test ends, before the
// namespace and the CRDs it made, whose deletion Locks may block.
func deleteLocksAtEnd(t *testing.T, ns string) {
	t.Helper()
	t.Cleanup(func() {
		if err := kube.Client.DeleteAllOf(context.Background(), &lockv1alpha1.Lock{}, client.InNamespace(ns)); err != nil {
			t.Errorf("deleting the Locks of %s: %v", ns, err)
		}
	})
}

// installCRD installs a namespaced kind in group, served as v1, and waits
// until it is served.
func installCRD(t *testing.T, group, kind, plural string) {
	t.Helper()
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group,
			"names": map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)},
			"scope": "Namespaced",
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
			}},
		},
	}}
	if err := kube.Client.Create(t.Context(), crd); err != nil {
		t.Fatalf("creating CRD %s.%s: %v", plural, group, err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), crd) })
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("%s.%s served", plural, group), func(ctx context.Context) error {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind + "List"})
		return kube.Client.List(ctx, list)
	})
}

// TestWhyReadOnly: for a resource under ReadOnly Locks (one that targets
// it, one that selects it), kubectl lock why says that its updates are
// frozen, naming those Locks and not the CanNotDelete one beside them,
// and kubectl lock list shows each Lock's level. Whether a freeze is in
// force is the Lock's ReadOnly condition, which lockguard's reconciler
// writes; why and list report it, so here it is only checked to be one of
// the two states and to agree between the Locks and the verdict.
func TestWhyReadOnly(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "x")
	deleteLocksAtEnd(t, ns)
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	createLabelledStack(t, ns, "web", map[string]string{"tier": "web"})
	freeze := framework.NewLock(ns, "freeze-db", "Stack", "db", "Change freeze")
	freeze.Spec.Level = lockv1alpha1.LevelReadOnly
	tierDB := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-tier-db"},
		Spec:       lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}, Level: lockv1alpha1.LevelReadOnly},
	}
	keep := framework.NewLock(ns, "keep-db", "Stack", "db", "")
	for _, l := range []*lockv1alpha1.Lock{freeze, tierDB, keep} {
		kube.CreateLock(t, l)
	}
	framework.Eventually(t, framework.DefaultTimeout, "the Locks active", func(ctx context.Context) error {
		for _, l := range []*lockv1alpha1.Lock{freeze, tierDB, keep} {
			var got lockv1alpha1.Lock
			if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(l), &got); err != nil {
				return err
			}
			if !got.Status.Active || got.Status.ObservedGeneration != got.Generation {
				return fmt.Errorf("Lock %s: status %+v", l.Name, got.Status)
			}
		}
		return nil
	})

	w := kubectlWhy(t, "stack/db", "-n", ns)
	wantAgree(t, "why stack/db", w, dryRunDelete(t, framework.StackGVK, ns, "db"))
	if diff := cmp.Diff([]string{ns + "/freeze-db Stack/db Active", ns + "/freeze-tier-db selector:tier=db Active", ns + "/keep-db Stack/db Active"}, lockRows(w.Direct)); diff != "" {
		t.Errorf("why stack/db: direct Locks -want, +got:\n%s", diff)
	}
	var frozen []string
	inForce := false
	for _, l := range w.Update.Locks {
		frozen = append(frozen, l.Name+" "+l.Scope)
		if l.Freeze != "InForce" && l.Freeze != "Pending" {
			t.Errorf("why stack/db: Lock %s's freeze is %q, want InForce or Pending", l.Name, l.Freeze)
		}
		inForce = inForce || l.Freeze == "InForce"
	}
	if diff := cmp.Diff([]string{"freeze-db Stack/db", "freeze-tier-db selector:tier=db"}, frozen); diff != "" || !w.Update.Frozen || w.Update.InForce != inForce {
		t.Errorf("why stack/db: update %+v; frozen by -want, +got:\n%s", w.Update, diff)
	}
	wantSelectors := []whySelector{{Name: "freeze-tier-db", Selector: "selector:tier=db", Level: "ReadOnly", Covers: true,
		Requirements: []whyRequirement{{Requirement: "tier=db", Label: "tier=db", Met: true}}}}
	if diff := cmp.Diff(wantSelectors, w.Selectors); diff != "" {
		t.Errorf("why stack/db: selectors -want, +got:\n%s", diff)
	}
	if w = kubectlWhy(t, "stack/web", "-n", ns); w.Update == nil || w.Update.Frozen || len(w.Update.Locks) != 0 {
		t.Errorf("why stack/web: update %+v, want not frozen", w.Update)
	}

	r := kubectlLock(t, "", "list", "-n", ns)
	levels := map[string]string{}
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")[1:] {
		f := strings.Fields(line)
		switch {
		case len(f) > 2 && f[2] == "CanNotDelete":
			levels[f[1]] = f[2]
		case len(f) > 4 && f[2] == "ReadOnly" && (f[3] == "(pending)" || f[3]+" "+f[4] == "(in force)"):
			levels[f[1]] = "ReadOnly"
		}
	}
	if diff := cmp.Diff(map[string]string{"freeze-db": "ReadOnly", "freeze-tier-db": "ReadOnly", "keep-db": "CanNotDelete"}, levels); r.err != nil || diff != "" {
		t.Errorf("kubectl lock list: err %v; levels -want, +got:\n%s\n%s", r.err, diff, r.stdout)
	}
}
