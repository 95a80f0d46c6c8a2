package contract_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestPluginClusterLockUpdate (docs/clusterlock.md, docs/contract.md rules
// 18 and 22): kubectl lock update clusterlock/NAME changes a ClusterLock as
// it changes a Lock, through the suite's cluster-unlock webhook entry (as
// on 1.29) and, where the API server serves admissionregistration.k8s.io/v1
// policies, the chart's cluster-unlock ValidatingAdmissionPolicy
// (eachClusterUnlockDecider, checkPluginClusterUpdate).
func TestPluginClusterLockUpdate(t *testing.T) {
	inProcess(t)
	eachClusterUnlockDecider(t, "clku", checkPluginClusterUpdate)
}

// checkPluginClusterUpdate: kubectl lock namespace/NS --audit --for 3h
// creates an audit ClusterLock, and says kubectl lock update
// clusterlock/NAME --enforce makes it refuse (given labels, the admin
// adds them with a merge patch). A user who may read ClusterLocks but
// lacks lockguard-cluster-lock is refused the update by RBAC (patch), the
// error naming lockguard-cluster-lock. With it, the user raises the
// ClusterLock (--enforce, --level ReadOnly, a later --for, --reason), with
// no note: the namespace's delete is then refused naming the new reason,
// and its freeze comes in force. Lowering it (level, an earlier expiry,
// Audit) is said to need the verb unlock before it is sent, refused by
// decider, the error naming lockguard-cluster-unlock, and changes nothing
// (not even the reason sent with it). With lockguard-cluster-unlock, a
// server-side dry run of the lowering is allowed and changes nothing, and
// the real one lowers the level and the expiry; -o json prints the
// ClusterLock; the namespace's delete is still refused.
func checkPluginClusterUpdate(t *testing.T, nsName, decider string, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}
	if err := kube.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), ns) })
	name := "namespace-" + nsName
	r := kubectlLock(t, "", "namespace/"+nsName, "--audit", "--for", "3h", "--reason", "production")
	t.Cleanup(func() {
		_ = kube.Client.Delete(context.Background(), &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	wantAudit := "the ClusterLock " + name + " on Namespace/" + nsName + " is in Audit enforcement: it refuses nothing; each request it would refuse " +
		"(deleting what it covers) is allowed with a warning and recorded in its status.lastWouldDeny (kubectl lock show clusterlock/" + name + "); " +
		"kubectl lock update clusterlock/" + name + " --enforce makes it refuse; it expires at "
	if r.err != nil || !strings.HasPrefix(r.stdout, "clusterlock.core.navique.com/"+name+" created\n"+wantAudit) {
		t.Fatalf("kubectl lock namespace/%s --audit: err %v, stdout %q; want it to begin %q", nsName, r.err, r.stdout, wantAudit)
	}
	if len(labels) > 0 {
		label, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
		if err != nil {
			t.Fatal(err)
		}
		if err := kube.Client.Patch(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, label)); err != nil {
			t.Fatal(err)
		}
	}
	read := func() *lockv1alpha1.ClusterLock {
		t.Helper()
		var cl lockv1alpha1.ClusterLock
		if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
			t.Fatalf("reading ClusterLock %s: %v", name, err)
		}
		return &cl
	}
	created := read()
	user := "clku-user-" + nsName
	as := []string{"--as", user, "--as-group", "system:authenticated"}
	update := func(args ...string) result {
		t.Helper()
		return kubectlLock(t, "", append(append([]string{"update", "clusterlock/" + name}, args...), as...)...)
	}

	// A reader of ClusterLocks, without lockguard-cluster-lock, may not
	// patch them.
	bindCluster(t, user, clusterRole(t, "clku-get-"+nsName, rbacv1.PolicyRule{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"clusterlocks"}, Verbs: []string{"get"}}))
	wantRBAC := `cannot patch resource "clusterlocks" in API group "core.navique.com" at the cluster scope` +
		"\nYou lack the verb \"patch\" on ClusterLocks: ask for a ClusterRoleBinding to the ClusterRole lockguard-cluster-lock"
	framework.Eventually(t, framework.DefaultTimeout, "kubectl lock update refused by RBAC's patch", func(context.Context) error {
		if r = update("--enforce"); r.err == nil || !strings.HasSuffix(r.err.Error(), wantRBAC) {
			return fmt.Errorf("err %v; want it to end with %q", r.err, wantRBAC)
		}
		return nil
	})
	if cl := read(); cl.Spec.Enforcement != lockv1alpha1.EnforcementAudit || cl.ResourceVersion != created.ResourceVersion {
		t.Errorf("the ClusterLock after RBAC's refusal: enforcement %s, resourceVersion %s; want Audit, %s", cl.Spec.Enforcement, cl.ResourceVersion, created.ResourceVersion)
	}

	// With lockguard-cluster-lock: raising is free.
	bindCluster(t, user, lockv1alpha1.ClusterLockRole)
	framework.Eventually(t, framework.DefaultTimeout, "kubectl lock update with "+lockv1alpha1.ClusterLockRole, func(context.Context) error {
		r = update("--enforce", "--level", "ReadOnly", "--for", "6h", "--reason", "change freeze")
		return r.err
	})
	raised := read()
	want := "clusterlock.core.navique.com/" + name + " patched\n" +
		"  reason: \"production\" -> \"change freeze\"\n" +
		"  level: CanNotDelete -> ReadOnly\n" +
		"  expiresAt: " + created.AsLock().ExpiresAtString() + " -> " + raised.AsLock().ExpiresAtString() + "\n" +
		"  enforcement: Audit -> Enforce\n" +
		"lockguard reports the change in the ClusterLock's status: kubectl lock show clusterlock/" + name + "\n"
	if r.stdout != want || r.stderr != "" {
		t.Errorf("kubectl lock update (raise): stdout %q, stderr %q; want stdout %q and nothing on stderr", r.stdout, r.stderr, want)
	}
	if s := raised.Spec; s.Level != lockv1alpha1.LevelReadOnly || s.Enforcement != lockv1alpha1.EnforcementEnforce || s.Reason != "change freeze" ||
		s.ExpiresAt == nil || !s.ExpiresAt.After(created.Spec.ExpiresAt.Add(2*time.Hour)) || s.TargetRef != created.Spec.TargetRef {
		t.Errorf("the raised ClusterLock's spec %+v; want ReadOnly, Enforce, the new reason, an expiry 3h later, the same target", s)
	}
	wantDenied := fmt.Sprintf(`Namespace %s is protected by ClusterLock(s) [%s (reason: "change freeze")]`, nsName, name)
	framework.Eventually(t, framework.DefaultTimeout, "the namespace's delete refused by the enforced ClusterLock", func(ctx context.Context) error {
		err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}, client.DryRunAll)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantDenied) {
			return fmt.Errorf("dry-run delete: %v; want Forbidden with %q", err, wantDenied)
		}
		return nil
	})
	waitClusterReadOnly(t, name, lockv1alpha1.ReasonInForce)

	// Lowering with lockguard-cluster-lock, without unlock: noted,
	// refused, nothing changed.
	raised = read()
	earlier := raised.Spec.ExpiresAt.Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, tc := range []struct {
		args    []string
		lowered lockv1alpha1.Lowered
	}{
		{[]string{"--level", "CanNotDelete", "--reason", "thaw"}, lockv1alpha1.LoweredLevel},
		{[]string{"--until", earlier}, lockv1alpha1.LoweredExpiry},
		{[]string{"--audit"}, lockv1alpha1.LoweredEnforcement},
	} {
		note := "Note: this lowers the " + string(tc.lowered) + " of ClusterLock " + name + ", which needs the verb \"unlock\" on it besides patch " +
			"(the ClusterRole lockguard-cluster-unlock)\n"
		wantErr := decider + lockv1alpha1.ClusterUnlockMessage("lowering the "+string(tc.lowered)+" of", name) +
			"\nYou lack the verb \"unlock\" on ClusterLocks: ask for a ClusterRoleBinding to the ClusterRole lockguard-cluster-unlock"
		framework.Eventually(t, framework.DefaultTimeout, "kubectl lock update "+strings.Join(tc.args, " ")+" refused", func(context.Context) error {
			r = update(tc.args...)
			if r.err == nil {
				t.Fatalf("kubectl lock update %v without unlock went through: stdout %q", tc.args, r.stdout)
			}
			if !strings.HasSuffix(r.err.Error(), wantErr) {
				return fmt.Errorf("err %v; want it to end with %q", r.err, wantErr)
			}
			return nil
		})
		if r.stderr != note || r.stdout != "" {
			t.Errorf("kubectl lock update %v without unlock: stdout %q, stderr %q; want nothing and the note %q", tc.args, r.stdout, r.stderr, note)
		}
		if cl := read(); !sameClusterSpec(cl, raised) {
			t.Errorf("kubectl lock update %v, refused, changed the ClusterLock: spec %+v, want %+v", tc.args, cl.Spec, raised.Spec)
		}
	}

	// With unlock: a server dry run changes nothing; the real one lowers.
	bindCluster(t, user, lockv1alpha1.ClusterUnlockRole)
	noteLevel := "Note: this lowers the level of ClusterLock " + name + ", which needs the verb \"unlock\" on it besides patch (the ClusterRole lockguard-cluster-unlock)\n"
	framework.Eventually(t, framework.DefaultTimeout, "kubectl lock update --dry-run=server with lockguard-cluster-unlock", func(context.Context) error {
		r = update("--level", "CanNotDelete", "--dry-run=server")
		return r.err
	})
	if want := "clusterlock.core.navique.com/" + name + " patched (server dry run)\n  level: ReadOnly -> CanNotDelete\n"; r.stdout != want || r.stderr != noteLevel {
		t.Errorf("kubectl lock update --dry-run=server: stdout %q, stderr %q; want %q and the note", r.stdout, r.stderr, want)
	}
	if cl := read(); !sameClusterSpec(cl, raised) {
		t.Errorf("the ClusterLock after a server dry run: spec %+v, want %+v", cl.Spec, raised.Spec)
	}
	r = update("--level", "CanNotDelete", "--until", earlier, "-o", "json")
	if r.err != nil || !strings.Contains(r.stdout, `"kind": "ClusterLock"`) || !strings.Contains(r.stdout, `"level": "CanNotDelete"`) ||
		!strings.Contains(r.stdout, `"expiresAt": "`+earlier+`"`) {
		t.Errorf("kubectl lock update --level CanNotDelete --until %s -o json with lockguard-cluster-unlock: err %v, stdout %s", earlier, r.err, r.stdout)
	}
	if cl := read(); cl.Spec.Level != lockv1alpha1.LevelCanNotDelete || cl.AsLock().ExpiresAtString() != earlier {
		t.Errorf("the lowered ClusterLock: level %s, expiresAt %s; want CanNotDelete, %s", cl.Spec.Level, cl.AsLock().ExpiresAtString(), earlier)
	}
	if err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName}}, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("dry-run delete under the lowered (CanNotDelete) ClusterLock: %v; want Forbidden", err)
	}
}

// sameClusterSpec reports whether two reads of a ClusterLock have the same
// spec.
func sameClusterSpec(a, b *lockv1alpha1.ClusterLock) bool {
	return a.Spec.Level == b.Spec.Level && a.Spec.Enforcement == b.Spec.Enforcement && a.Spec.Reason == b.Spec.Reason &&
		a.AsLock().ExpiresAtString() == b.AsLock().ExpiresAtString() && a.Spec.TargetRef == b.Spec.TargetRef
}
