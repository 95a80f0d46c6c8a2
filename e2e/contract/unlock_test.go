package contract_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// unlockWebhook is how the API server prefixes the refusal of the chart's
// webhook entry unlock.lockguard.core.navique.com.
const unlockWebhook = `admission webhook "unlock.lockguard.core.navique.com" denied the request: `

// TestUnlockPermission: deleting a Lock, or lowering its level, needs the
// verb unlock besides delete or update (docs/contract.md rules 9 and 18),
// as real users with the chart's roles: a user bound to the built-in edit
// ClusterRole (into which the chart's lockguard-view and lockguard-edit
// are aggregated) creates Locks and raises their level, but neither
// deletes one nor lowers one (its level, its expiry, or its enforcement
// to Audit: rule 20), refused with the message that names the verb; bound to lockguard-unlock too, it does both; a Role granting
// unlock on one Lock (resourceNames) lifts that Lock only. The namespace
// controller is exempt, the garbage collector is not. Checked through the
// webhook entry (the suite's install, as on 1.29) and, where the API
// server serves admissionregistration.k8s.io/v1 policies, through the
// chart's ValidatingAdmissionPolicy; both times, kubectl lock update too
// (checkPluginUpdate).
func TestUnlockPermission(t *testing.T) {
	inProcess(t)
	t.Run("webhook", func(t *testing.T) {
		ns := kube.NewNamespace(t, "unlock")
		checkUnlock(t, ns, unlockWebhook)
		checkPluginRoles(t, ns)
		checkPluginUpdate(t, ns, unlockWebhook)
	})
	t.Run("policy", func(t *testing.T) {
		skipWithoutPolicies(t)
		ns := kube.NewNamespace(t, "unlock-policy")
		// The chart's policy, rendered as for a 1.30+ API server, bound to
		// ns alone (the suite's webhook entry still answers elsewhere; the
		// API server runs policies before webhooks, so a refusal here is
		// the policy's).
		sel := map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": ns}}
		decider := applyChartPolicy(t, framework.Release{Name: "lg-ul", Namespace: "lockguard-unlock"}, "lg-ul-lockguard-unlock", "namespaceSelector", sel)
		checkUnlock(t, ns, decider)
		checkPluginUpdate(t, ns, decider)
	})
}

// checkUnlock checks rule 18 in ns, where a refusal is prefixed with
// decider.
func checkUnlock(t *testing.T, ns, decider string) {
	t.Helper()
	ctx := t.Context()
	locks := &lockv1alpha1.LockList{}
	editor := kube.EditUser(t, suite.env.Config, ns, "unlock-editor", locks)
	unlocker := kube.EditUser(t, suite.env.Config, ns, "unlock-holder", locks)
	bind(t, ns, "unlock-holder", "ClusterRole", lockv1alpha1.UnlockRole)
	scoped := kube.EditUser(t, suite.env.Config, ns, "unlock-scoped", locks)
	one := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unlock-one"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"locks"}, Verbs: []string{lockv1alpha1.UnlockVerb}, ResourceNames: []string{"lk-one"},
	}}}
	if err := kube.Client.Create(ctx, one); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "unlock-scoped", "Role", one.Name)

	newLock := func(name string, level lockv1alpha1.LockLevel) *lockv1alpha1.Lock {
		t.Helper()
		l := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "app"}, Level: level}}
		if err := editor.Create(ctx, l); err != nil {
			t.Fatalf("an edit user creating Lock %s: %v", name, err)
		}
		return l
	}
	lkA, lkRO := newLock("lk-a", lockv1alpha1.LevelCanNotDelete), newLock("lk-ro", lockv1alpha1.LevelReadOnly)
	lkOne, lkTwo := newLock("lk-one", lockv1alpha1.LevelCanNotDelete), newLock("lk-two", lockv1alpha1.LevelCanNotDelete)

	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s: allowed, want refused with %q", what, want)
		} else if !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), decider+want) {
			t.Errorf("%s: %v\nwant forbidden, ending with %q", what, err, decider+want)
		}
	}
	level := func(l lockv1alpha1.LockLevel) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"level":%q}}`, l))
	}

	// In force once the API server has the policy (or the binding's RBAC):
	// probe with dry runs, which admission sees as the real thing.
	wantDelete := lockv1alpha1.UnlockDeleteMessage(ns, "lk-a")
	framework.Eventually(t, framework.DefaultTimeout, "the edit user's delete of a Lock refused by "+decider, func(ctx context.Context) error {
		err := editor.Delete(ctx, lkA.DeepCopy(), client.DryRunAll)
		if err == nil || !strings.HasSuffix(err.Error(), decider+wantDelete) {
			return fmt.Errorf("a dry-run delete: %v", err)
		}
		return nil
	})
	refused("an edit user deleting a Lock", editor.Delete(ctx, lkA.DeepCopy()), wantDelete)
	if err := editor.DeleteAllOf(ctx, &lockv1alpha1.Lock{}, client.InNamespace(ns)); err == nil ||
		!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), lockv1alpha1.UnlockRefusal) {
		t.Errorf("an edit user deleting every Lock (deletecollection): %v, want refused for the verb unlock", err)
	}
	wantLower := lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredLevel, ns, "lk-ro")
	refused("an edit user lowering a Lock's level", editor.Patch(ctx, lkRO.DeepCopy(), level(lockv1alpha1.LevelCanNotDelete)), wantLower)
	if err := editor.Patch(ctx, lkRO.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"reason":"freeze"}}`))); err != nil {
		t.Errorf("an edit user changing a ReadOnly Lock's reason: %v", err)
	}
	if err := editor.Patch(ctx, lkA.DeepCopy(), level(lockv1alpha1.LevelReadOnly)); err != nil {
		t.Errorf("an edit user raising a Lock's level: %v", err)
	}
	// The garbage collector is not exempt: a Lock is never lifted through
	// an ownerReference.
	gc := impersonate(t, "system:serviceaccount:kube-system:generic-garbage-collector", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	refused("the garbage collector deleting a Lock", gc.Delete(ctx, lkRO.DeepCopy(), client.DryRunAll), lockv1alpha1.UnlockDeleteMessage(ns, "lk-ro"))

	// With lockguard-unlock.
	framework.Eventually(t, framework.DefaultTimeout, "a lockguard-unlock user may delete a Lock", func(ctx context.Context) error {
		return unlocker.Delete(ctx, lkA.DeepCopy(), client.DryRunAll)
	})
	if err := unlocker.Patch(ctx, lkRO.DeepCopy(), level(lockv1alpha1.LevelCanNotDelete)); err != nil {
		t.Errorf("a lockguard-unlock user lowering a Lock's level: %v", err)
	}
	if err := unlocker.Delete(ctx, lkA.DeepCopy()); err != nil {
		t.Errorf("a lockguard-unlock user deleting a Lock: %v", err)
	}

	// Expiry (rule 19): an earlier expiresAt, or one on a Lock that had
	// none, shortens the Lock; a later one, or none, extends it.
	expires := func(d time.Duration) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"expiresAt":%q}}`, time.Now().Add(d).UTC().Format(time.RFC3339)))
	}
	wantShorten := lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredExpiry, ns, "lk-two")
	refused("an edit user setting an expiry on a Lock that had none", editor.Patch(ctx, lkTwo.DeepCopy(), expires(time.Hour)), wantShorten)
	if err := unlocker.Patch(ctx, lkTwo.DeepCopy(), expires(2*time.Hour)); err != nil {
		t.Errorf("a lockguard-unlock user setting an expiry: %v", err)
	}
	if err := editor.Patch(ctx, lkTwo.DeepCopy(), expires(3*time.Hour)); err != nil {
		t.Errorf("an edit user extending a Lock: %v", err)
	}
	refused("an edit user moving a Lock's expiry earlier", editor.Patch(ctx, lkTwo.DeepCopy(), expires(time.Hour)), wantShorten)
	if err := editor.Patch(ctx, lkTwo.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"expiresAt":null}}`))); err != nil {
		t.Errorf("an edit user removing a Lock's expiry (it then never expires): %v", err)
	}

	// Enforcement (rule 20): Audit refuses nothing, so putting a Lock in
	// Audit lowers it; putting it back to Enforce is free.
	enforcement := func(e lockv1alpha1.Enforcement) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"enforcement":%q}}`, e))
	}
	refused("an edit user putting a Lock in Audit", editor.Patch(ctx, lkTwo.DeepCopy(), enforcement(lockv1alpha1.EnforcementAudit)),
		lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredEnforcement, ns, "lk-two"))
	if err := unlocker.Patch(ctx, lkTwo.DeepCopy(), enforcement(lockv1alpha1.EnforcementAudit)); err != nil {
		t.Errorf("a lockguard-unlock user putting a Lock in Audit: %v", err)
	}
	if err := editor.Patch(ctx, lkTwo.DeepCopy(), enforcement(lockv1alpha1.EnforcementEnforce)); err != nil {
		t.Errorf("an edit user putting an audit Lock back to Enforce: %v", err)
	}

	// unlock on lk-one alone.
	framework.Eventually(t, framework.DefaultTimeout, "the user with unlock on lk-one may delete it", func(ctx context.Context) error {
		return scoped.Delete(ctx, lkOne.DeepCopy(), client.DryRunAll)
	})
	refused("a user with unlock on lk-one deleting lk-two", scoped.Delete(ctx, lkTwo.DeepCopy()), lockv1alpha1.UnlockDeleteMessage(ns, "lk-two"))
	if err := scoped.Delete(ctx, lkOne.DeepCopy()); err != nil {
		t.Errorf("a user with unlock on lk-one deleting it: %v", err)
	}

	// The namespace controller empties namespaces being deleted (rule 11:
	// their deletion finishes).
	nc := impersonate(t, "system:serviceaccount:kube-system:namespace-controller", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	if err := nc.Delete(ctx, lkTwo.DeepCopy()); err != nil {
		t.Errorf("the namespace controller deleting a Lock: %v", err)
	}
}

// bind binds user to the role (kind ClusterRole or Role) in ns.
func bind(t *testing.T, ns, user, kind, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if err := client.IgnoreAlreadyExists(kube.Client.Create(t.Context(), rb)); err != nil {
		t.Fatal(err)
	}
	kube.WaitGranted(t, user, ns, rb.RoleRef)
}

// impersonate returns a client acting as user in groups (and
// system:authenticated).
func impersonate(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(suite.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	return clientFor(t, cfg)
}

// checkPluginRoles: kubectl lock and kubectl unlock, refused, name the
// role the user lacks.
func checkPluginRoles(t *testing.T, ns string) {
	t.Helper()
	kube.CreateObject(t, framework.StackGVK, ns, "app")
	l := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lk-plugin"},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "app"}}}
	if err := kube.Client.Create(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	// kubectl unlock reads the target (for the selector Locks that cover
	// it): the edit role does not cover the test kinds.
	stacks := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "read-stacks"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"stacks"}, Verbs: []string{"get", "list"},
	}}}
	if err := kube.Client.Create(t.Context(), stacks); err != nil {
		t.Fatal(err)
	}
	bind(t, ns, "unlock-editor", "Role", stacks.Name)
	as := []string{"--as", "unlock-editor", "--as-group", "system:authenticated"}
	r := kubectlUnlock(t, "", append([]string{"stack/app", "-n", ns, "--yes"}, as...)...)
	want := lockv1alpha1.UnlockDeleteMessage(ns, "lk-plugin") + "\nYou lack the verb \"unlock\" on this Lock: ask for a RoleBinding to the ClusterRole lockguard-unlock in its namespace " +
		"(or a Role granting \"unlock\" on this Lock alone, with resourceNames)"
	if r.err == nil || !strings.HasSuffix(r.err.Error(), want) {
		t.Errorf("kubectl unlock as an edit user: %v\nwant an error ending with %q", r.err, want)
	}
	if err := kube.Client.Get(t.Context(), client.ObjectKeyFromObject(l), l); err != nil {
		t.Errorf("the Lock kubectl unlock was refused: %v", err)
	}

	bind(t, ns, "unlock-viewer", "ClusterRole", lockv1alpha1.ViewRole)
	r = kubectlLock(t, "", "--all", "-n", ns, "--as", "unlock-viewer", "--as-group", "system:authenticated")
	want = "\nYou lack the verb \"create\" on Locks: ask for the ClusterRole lockguard-edit (aggregated into the built-in edit and admin ClusterRoles) in this namespace"
	if r.err == nil || !strings.HasSuffix(r.err.Error(), want) {
		t.Errorf("kubectl lock --all as a lockguard-view user: %v\nwant an error ending with %q", r.err, want)
	}
	if errors.Is(r.err, context.DeadlineExceeded) {
		t.Error("kubectl lock waited for its deadline")
	}
}

// applyChartPolicy applies the chart's ValidatingAdmissionPolicy name and
// its binding, rendered as r for a 1.30+ API server, the binding's
// matchResources narrowed by selector (its field: namespaceSelector or
// objectSelector) to sel, and removes them when the test ends. It returns
// how the API server prefixes the policy's refusals.
func applyChartPolicy(t *testing.T, r framework.Release, name, selector string, sel map[string]any) string {
	t.Helper()
	r.APIVersions = []string{"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"}
	objs, err := framework.Render(t.Context(), r)
	if err != nil {
		t.Fatal(err)
	}
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetName() != name || !strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") {
			continue
		}
		if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
			if err := unstructured.SetNestedField(o.Object, sel, "spec", "matchResources", selector); err != nil {
				t.Fatal(err)
			}
		}
		apply = append(apply, o)
	}
	if len(apply) != 2 {
		t.Fatalf("rendered %d of the policy %s and its binding, want 2", len(apply), name)
	}
	if err := framework.Apply(t.Context(), kube.Client, apply...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, o := range apply {
			_ = kube.Client.Delete(context.Background(), o)
		}
	})
	return fmt.Sprintf("ValidatingAdmissionPolicy '%s' with binding '%s' denied request: ", name, name)
}
