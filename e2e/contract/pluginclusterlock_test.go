package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestPluginClusterLock (docs/contract.md rule 22, docs/plugin.md): a user
// without lockguard-cluster-lock cannot lock a namespace with the plugin,
// which names the role; with it, kubectl lock namespace/NAME creates the
// ClusterLock namespace-NAME and returns once it is active, and the
// namespace's delete is then refused at once; kubectl lock list -A and
// kubectl lock show clusterlock/NAME show it; kubectl lock why names the
// ClusterLock; kubectl unlock without lockguard-cluster-unlock is refused
// naming it; with it, it deletes the ClusterLock and returns once the
// namespace's delete is allowed, and the namespace is deleted.
func TestPluginClusterLock(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clkp-" + suffix}}
	if err := kube.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), ns) })
	user := "clkp-user-" + suffix
	as := []string{"--as", user, "--as-group", "system:authenticated"}
	// Deleting namespaces, so that kubectl unlock can check the delete.
	bindCluster(t, user, clusterRole(t, "clkp-ns-"+suffix, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "delete"}}))

	r := kubectlLock(t, "", append([]string{"namespace/" + ns.Name, "--reason", "production"}, as...)...)
	if r.err == nil || !strings.Contains(r.err.Error(), `cannot create resource "clusterlocks"`) || !strings.Contains(r.err.Error(), "ClusterRole "+lockv1alpha1.ClusterLockRole) {
		t.Fatalf("kubectl lock namespace/%s without %s: %v; want RBAC's refusal naming the role", ns.Name, lockv1alpha1.ClusterLockRole, r.err)
	}

	bindCluster(t, user, lockv1alpha1.ClusterLockRole)
	name := "namespace-" + ns.Name
	framework.Eventually(t, framework.DefaultTimeout, "kubectl lock ns/"+ns.Name+" with "+lockv1alpha1.ClusterLockRole, func(context.Context) error {
		r = kubectlLock(t, "", append([]string{"ns/" + ns.Name, "--reason", "production"}, as...)...)
		return r.err
	})
	want := "clusterlock.core.navique.com/" + name + " created\n" +
		"namespace/" + ns.Name + " is locked: its deletion is denied until the ClusterLock " + name + " is deleted\n"
	if r.stdout != want {
		t.Errorf("kubectl lock stdout %q; want %q", r.stdout, want)
	}
	cl := &lockv1alpha1.ClusterLock{}
	if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	if ref := cl.Spec.TargetRef; ref != (lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: ns.Name}) || cl.Spec.Reason != "production" || !cl.Status.Active {
		t.Errorf("ClusterLock %s: spec %+v, status %+v", name, cl.Spec, cl.Status)
	}
	// Returned means enforced: no polling here.
	err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.DryRunAll)
	wantDenied := fmt.Sprintf(`Namespace %s is protected by ClusterLock(s) [%s (reason: "production")]`, ns.Name, name)
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantDenied) {
		t.Fatalf("dry-run delete of the locked namespace: %v; want Forbidden with %q", err, wantDenied)
	}
	// Again: unchanged.
	if r := kubectlLock(t, "", append([]string{"namespaces/" + ns.Name, "--reason", "production"}, as...)...); r.err != nil || r.stdout != strings.Replace(want, "created", "unchanged", 1) {
		t.Errorf("kubectl lock again: err %v, stdout %q", r.err, r.stdout)
	}
	// Again with another reason: unchanged, and the warning names the kind.
	if r := kubectlLock(t, "", append([]string{"namespaces/" + ns.Name, "--reason", "other"}, as...)...); r.err != nil || r.stderr != "Warning: the existing ClusterLock's reason \"production\" was kept\n" {
		t.Errorf("kubectl lock again, another reason: err %v, stderr %q", r.err, r.stderr)
	}

	// list -A shows it after the Locks; show clusterlock/NAME in full.
	r = kubectlLock(t, "", "list", "-A")
	_, section, _ := strings.Cut(r.stdout, "ClusterLocks:\n")
	var row string
	for _, line := range strings.Split(section, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[1] == name {
			row = strings.Join(f, " ")
		}
	}
	if wantRow := "Namespace/" + ns.Name + " " + name + " CanNotDelete Active <none>"; r.err != nil || !strings.HasPrefix(row, wantRow) || !strings.HasSuffix(row, " production") {
		t.Errorf("kubectl lock list -A: err %v, ClusterLock row %q; want %q ... production", r.err, row, wantRow)
	}
	r = kubectlLock(t, "", "show", "clusterlock/"+name)
	for _, s := range []string{"Name:            " + name + "\n", "Kind:            ClusterLock (cluster-scoped)\n", "Scope:           Namespace/" + ns.Name, "Status:          Active"} {
		if r.err != nil || !strings.Contains(r.stdout, s) {
			t.Errorf("kubectl lock show clusterlock/%s: err %v; stdout lacks %q", name, r.err, s)
		}
	}

	r = kubectlLock(t, "", "why", "namespace/"+ns.Name)
	for _, s := range []string{"DELETE namespace/" + ns.Name + ": denied by lockguard\n", wantDenied, "The ClusterLocks that name it:\n", name + "   Namespace/" + ns.Name + "   Active   production\n"} {
		if r.err != nil || !strings.Contains(r.stdout, s) {
			t.Errorf("kubectl lock why namespace/%s: err %v; stdout lacks %q", ns.Name, r.err, s)
		}
	}

	r = kubectlUnlock(t, "", append([]string{"namespace/" + ns.Name, "--yes"}, as...)...)
	if r.err == nil || !strings.Contains(r.err.Error(), "ClusterRole "+lockv1alpha1.ClusterUnlockRole) {
		t.Fatalf("kubectl unlock without %s: %v; want the role named", lockv1alpha1.ClusterUnlockRole, r.err)
	}
	if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, &lockv1alpha1.ClusterLock{}); err != nil {
		t.Fatalf("the ClusterLock after a refused unlock: %v", err)
	}

	bindCluster(t, user, lockv1alpha1.ClusterUnlockRole)
	framework.Eventually(t, framework.DefaultTimeout, "kubectl unlock with "+lockv1alpha1.ClusterUnlockRole, func(context.Context) error {
		r = kubectlUnlock(t, "", append([]string{"namespace/" + ns.Name, "--yes"}, as...)...)
		return r.err
	})
	wantUnlocked := "ClusterLocks protecting namespace/" + ns.Name + ":\n" +
		"LOCK" + strings.Repeat(" ", len(name)-1) + "STATUS   REASON\n" +
		name + "   Active   production\n" +
		"clusterlock.core.navique.com/" + name + " deleted\n" +
		"namespace/" + ns.Name + " is unlocked: it can be deleted\n"
	if r.stdout != wantUnlocked {
		t.Errorf("kubectl unlock stdout %q; want %q", r.stdout, wantUnlocked)
	}
	// Returned means allowed: the user deletes the namespace.
	if err := impersonate(t, user).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}); err != nil {
		t.Fatalf("deleting the unlocked namespace: %v", err)
	}
}

// TestPluginClusterLockKinds: kubectl lock takes the other spellings and
// kinds a ClusterLock protects (a CRD of another group by crd/, a
// cluster-scoped core.navique.com kind), why names the ClusterLock, and
// kubectl unlock lifts it so that the object is deleted.
func TestPluginClusterLockKinds(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	admin := withCRDs(t)
	suffix := rand.String(5)
	crd := clusterLockCRD("clkp" + suffix)
	if err := admin.Create(ctx, crd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), crd) })
	region := kube.CreateObject(t, framework.RegionGVK, "", "clkp-"+suffix)
	t.Cleanup(func() { _ = kube.DeleteObject(context.Background(), framework.RegionGVK, "", region.GetName()) })
	for _, tc := range []struct {
		arg, name, shown string
		obj              client.Object
	}{
		{"crd/" + crd.Name, "customresourcedefinition-" + crd.Name, "customresourcedefinition.apiextensions.k8s.io/" + crd.Name, crd},
		{"region/" + region.GetName(), "region-" + region.GetName(), "region.core.navique.com/" + region.GetName(), region},
	} {
		r := kubectlLock(t, "", tc.arg, "--reason", "platform")
		want := "clusterlock.core.navique.com/" + tc.name + " created\n" + tc.shown + " is locked: its deletion is denied until the ClusterLock " + tc.name + " is deleted\n"
		if r.err != nil || r.stdout != want {
			t.Fatalf("kubectl lock %s: err %v, stdout %q; want %q", tc.arg, r.err, r.stdout, want)
		}
		if err := admin.Delete(ctx, tc.obj, client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ClusterLock(s) ["+tc.name+" ") {
			t.Errorf("dry-run delete of %s: %v; want Forbidden naming %s", tc.arg, err, tc.name)
		}
		r = kubectlLock(t, "", "why", tc.arg)
		if r.err != nil || !strings.Contains(r.stdout, ": denied by lockguard\n") || !strings.Contains(r.stdout, "The ClusterLocks that name it:\n") || !strings.Contains(r.stdout, tc.name+"   ") {
			t.Errorf("kubectl lock why %s: err %v, stdout %q; want denied, naming %s", tc.arg, r.err, r.stdout, tc.name)
		}
		r = kubectlUnlock(t, "", tc.arg, "--yes")
		if r.err != nil || !strings.HasSuffix(r.stdout, tc.shown+" is unlocked: it can be deleted\n") {
			t.Fatalf("kubectl unlock %s: err %v, stdout %q", tc.arg, r.err, r.stdout)
		}
		// Returned means allowed: deleted at once.
		if err := admin.Delete(ctx, tc.obj); err != nil {
			t.Errorf("deleting %s once unlocked: %v", tc.arg, err)
		}
	}
}

// TestPluginClusterLockSelector (docs/contract.md rule 22, docs/plugin.md):
// kubectl lock namespaces --selector LABELS creates the selector
// ClusterLock namespace-LABELS (kind Namespace) and returns once it is
// active, every Namespace it matches then refusing its delete; run again,
// it is unchanged; a namespaced TYPE with --selector is refused saying to
// give --selector alone.
func TestPluginClusterLockSelector(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clkps-" + suffix, Labels: map[string]string{"clkps": suffix}}}
	if err := kube.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), ns) })
	name := "namespace-clkps-" + suffix
	t.Cleanup(func() {
		_ = kube.Client.Delete(context.Background(), &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	selector := "clkps=" + suffix
	r := kubectlLock(t, "", "namespaces", "--selector", selector, "--reason", "production")
	want := "clusterlock.core.navique.com/" + name + " created\n" +
		"the Namespace objects that match " + selector + ", now or later, are locked: their deletion is denied until the ClusterLock " + name + " is deleted\n"
	if r.err != nil || r.stdout != want {
		t.Fatalf("kubectl lock namespaces --selector %s: err %v, stdout %q; want %q", selector, r.err, r.stdout, want)
	}
	cl := &lockv1alpha1.ClusterLock{}
	if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	if s := cl.Spec.Selector; s == nil || len(s.Kinds) != 1 || s.Kinds[0] != "Namespace" || s.MatchLabels["clkps"] != suffix || cl.Spec.TargetRef.Name != "" || !cl.Status.Active {
		t.Errorf("ClusterLock %s: spec %+v, status %+v", name, cl.Spec, cl.Status)
	}
	// Returned means enforced: no polling here.
	err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.DryRunAll)
	if wantDenied := fmt.Sprintf("Namespace %s is protected by ClusterLock(s) [%s", ns.Name, name); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantDenied) {
		t.Fatalf("dry-run delete of the selected namespace: %v; want Forbidden with %q", err, wantDenied)
	}
	if r := kubectlLock(t, "", "namespaces", "--selector", selector, "--reason", "production"); r.err != nil || r.stdout != strings.Replace(want, "created", "unchanged", 1) {
		t.Errorf("kubectl lock again: err %v, stdout %q", r.err, r.stdout)
	}
	if r := kubectlLock(t, "", "stacks", "--selector", selector, "-n", ns.Name); r.err == nil || !strings.Contains(r.err.Error(), "give --selector alone") {
		t.Errorf("kubectl lock stacks --selector: %v; want the refusal of a namespaced TYPE", r.err)
	}
}
