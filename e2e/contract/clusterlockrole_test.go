package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestClusterLockRoleCannotLower (docs/contract.md rules 18 and 22): the
// shipped ClusterRole lockguard-cluster-lock grants update and patch on
// clusterlocks, so that its holders raise ClusterLocks (kubectl lock
// update clusterlock/NAME); a holder of it alone can lower or unprotect
// nothing. Checked through the suite's cluster-unlock webhook entry (as on
// 1.29) and, where the API server serves admissionregistration.k8s.io/v1
// policies, through the chart's cluster-unlock ValidatingAdmissionPolicy
// (eachClusterUnlockDecider, checkClusterLockRole).
func TestClusterLockRoleCannotLower(t *testing.T) {
	inProcess(t)
	eachClusterUnlockDecider(t, "clkr", checkClusterLockRole)
}

// checkClusterLockRole: an admin creates a ReadOnly ClusterLock named
// prefix-frozen on the Namespace prefix-a, expiring in 3h, and a selector
// ClusterLock prefix-selected (CanNotDelete, no expiry) on the Namespaces
// labelled prefix-sel=on (prefix-b), both carrying labels. A user bound
// to lockguard-cluster-lock alone then tries every way to lower or
// unprotect them, each refused and changing nothing: lowering the level
// (to CanNotDelete, or removing it, which defaults to it), an earlier or
// past expiresAt, one where there was none, Audit (merge patch, JSON
// patch, server-side apply, update) are refused by decider naming
// lockguard-cluster-unlock; changing the target, the selector (its
// labels, kinds, expressions) or swapping one for the other are refused
// by the CRD's validation; deleting them (one or all), and writing their
// status, by RBAC. Metadata is not protection: an ownerReference the user
// adds (to an owner that does not exist) lifts nothing, the garbage
// collector's delete being refused by decider. Raising is allowed (a
// later expiry, none, the reason, ReadOnly). At the end both still
// protect: the Namespaces' deletes are refused, the frozen one is still
// labelled read-only and its freeze in force.
func checkClusterLockRole(t *testing.T, prefix, decider string, labels map[string]string) {
	t.Helper()
	ctx := t.Context()
	selKey := prefix + "-sel"
	nsA := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-a"}}
	nsB := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-b", Labels: map[string]string{selKey: "on"}}}
	for _, ns := range []*corev1.Namespace{nsA, nsB} {
		if err := kube.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), ns) })
	}
	expires := metav1.NewTime(time.Now().Add(3 * time.Hour).UTC().Truncate(time.Second))
	frozen := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: prefix + "-frozen", Labels: labels},
		Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: nsA.Name},
			Reason: "freeze", Level: lockv1alpha1.LevelReadOnly, ExpiresAt: &expires}}
	selected := selectorClusterLock(prefix+"-selected", selKey, "on", "Namespace")
	selected.Labels = labels
	for _, cl := range []*lockv1alpha1.ClusterLock{frozen, selected} {
		if err := kube.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), cl) })
		kube.WaitClusterLock(t, cl.Name, lockv1alpha1.ReasonActive, "")
	}
	waitClusterReadOnly(t, frozen.Name, lockv1alpha1.ReasonInForce)

	user := prefix + "-holder"
	bindCluster(t, user, lockv1alpha1.ClusterLockRole)
	as := impersonate(t, user)
	read := func(name string) *lockv1alpha1.ClusterLock {
		t.Helper()
		var cl lockv1alpha1.ClusterLock
		if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
			t.Fatalf("reading ClusterLock %s: %v", name, err)
		}
		return &cl
	}
	ref := func(name string) *lockv1alpha1.ClusterLock {
		return &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}}
	}
	merge := func(format string, a ...any) client.Patch {
		return client.RawPatch(types.MergePatchType, fmt.Appendf(nil, format, a...))
	}
	at := func(d time.Duration) string { return time.Now().Add(d).UTC().Format(time.RFC3339) }
	lowering := func(what lockv1alpha1.Lowered, name string) string {
		return decider + lockv1alpha1.ClusterUnlockMessage("lowering the "+string(what)+" of", name)
	}

	// In force once RBAC has the binding (and the API server the policy):
	// probe with a dry run, which admission sees as the real thing.
	framework.Eventually(t, framework.DefaultTimeout, "lowering refused for want of the verb unlock, not by RBAC", func(ctx context.Context) error {
		err := as.Patch(ctx, ref(frozen.Name), merge(`{"spec":{"level":"CanNotDelete"}}`), client.DryRunAll)
		if want := lowering(lockv1alpha1.LoweredLevel, frozen.Name); !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), want) {
			return fmt.Errorf("a dry-run lowering of the level: %v; want Forbidden ending with %q", err, want)
		}
		return nil
	})

	// Each attempt is refused (Forbidden or Invalid, the error holding
	// want) and leaves the ClusterLock's spec and labels as they were.
	refused := func(what, name string, invalid bool, want string, do func() error) {
		t.Helper()
		before := read(name)
		err := do()
		switch {
		case err == nil:
			t.Errorf("%s (ClusterLock %s) by a %s holder: allowed; want refused with %q", what, name, lockv1alpha1.ClusterLockRole, want)
		case invalid && !apierrors.IsInvalid(err), !invalid && !apierrors.IsForbidden(err), !strings.Contains(err.Error(), want):
			t.Errorf("%s (ClusterLock %s) by a %s holder: %v; want it refused (invalid: %v) with %q", what, name, lockv1alpha1.ClusterLockRole, err, invalid, want)
		}
		if after := read(name); !apiequality.Semantic.DeepEqual(before.Spec, after.Spec) || !apiequality.Semantic.DeepEqual(before.Labels, after.Labels) {
			t.Errorf("%s (ClusterLock %s), refused, changed it: spec %+v labels %v; want spec %+v labels %v", what, name, after.Spec, after.Labels, before.Spec, before.Labels)
		}
	}
	patch := func(name string, p client.Patch) func() error {
		return func() error { return as.Patch(ctx, ref(name), p) }
	}

	// Lowering: the verb unlock (lockguard-cluster-unlock).
	for _, tc := range []struct {
		what, name string
		lowered    lockv1alpha1.Lowered
		patch      client.Patch
	}{
		{"lowering the level to CanNotDelete", frozen.Name, lockv1alpha1.LoweredLevel, merge(`{"spec":{"level":"CanNotDelete"}}`)},
		{"removing the level (the default is CanNotDelete)", frozen.Name, lockv1alpha1.LoweredLevel, merge(`{"spec":{"level":null}}`)},
		{"lowering the level and changing the reason", frozen.Name, lockv1alpha1.LoweredLevel, merge(`{"spec":{"level":"CanNotDelete","reason":"thaw"}}`)},
		{"an earlier expiresAt", frozen.Name, lockv1alpha1.LoweredExpiry, merge(`{"spec":{"expiresAt":%q}}`, at(time.Hour))},
		{"an expiresAt in the past", frozen.Name, lockv1alpha1.LoweredExpiry, merge(`{"spec":{"expiresAt":%q}}`, at(-time.Hour))},
		{"an expiresAt where there was none", selected.Name, lockv1alpha1.LoweredExpiry, merge(`{"spec":{"expiresAt":%q}}`, at(24*time.Hour))},
		{"enforcement Audit", frozen.Name, lockv1alpha1.LoweredEnforcement, merge(`{"spec":{"enforcement":"Audit"}}`)},
		{"enforcement Audit by a JSON patch", selected.Name, lockv1alpha1.LoweredEnforcement,
			client.RawPatch(types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/enforcement","value":"Audit"}]`))},
		{"the level by server-side apply", frozen.Name, lockv1alpha1.LoweredLevel, client.RawPatch(types.ApplyPatchType,
			fmt.Appendf(nil, `{"apiVersion":"core.navique.com/v1alpha1","kind":"ClusterLock","metadata":{"name":%q},"spec":{"level":"CanNotDelete"}}`, frozen.Name))},
	} {
		do := patch(tc.name, tc.patch)
		if tc.patch.Type() == types.ApplyPatchType {
			do = func() error {
				return as.Patch(ctx, ref(tc.name), tc.patch, client.FieldOwner("clkr-attacker"), client.ForceOwnership)
			}
		}
		refused(tc.what, tc.name, false, lowering(tc.lowered, tc.name), do)
	}
	refused("an update (PUT) lowering the level, the expiry and the enforcement", frozen.Name, false, decider, func() error {
		// lockguard's status writes may race the read: read again then.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cl := read(frozen.Name)
			earlier := metav1.NewTime(cl.Spec.ExpiresAt.Add(-time.Hour))
			cl.Spec.Level, cl.Spec.Enforcement, cl.Spec.ExpiresAt = lockv1alpha1.LevelCanNotDelete, lockv1alpha1.EnforcementAudit, &earlier
			return as.Update(ctx, cl)
		})
		if err != nil && !strings.Contains(err.Error(), lockv1alpha1.ClusterUnlockRefusal) {
			return fmt.Errorf("refused, not for the verb unlock: %w", err)
		}
		return err
	})

	// The scope: the CRD's validation.
	const targetImmutable, scopeImmutable = "targetRef is immutable", "the scope (targetRef or selector) is immutable"
	for _, tc := range []struct {
		what, name, want string
		patch            client.Patch
	}{
		{"another target", frozen.Name, targetImmutable, merge(`{"spec":{"targetRef":{"name":%q}}}`, prefix+"-elsewhere")},
		{"another target kind", frozen.Name, targetImmutable, merge(`{"spec":{"targetRef":{"kind":"PersistentVolume"}}}`)},
		{"a selector instead of the target", frozen.Name, scopeImmutable,
			merge(`{"spec":{"targetRef":null,"selector":{"kinds":["Namespace"],"matchLabels":{%q:"nowhere"}}}}`, selKey)},
		{"the selector's label value", selected.Name, scopeImmutable, merge(`{"spec":{"selector":{"matchLabels":{%q:"off"}}}}`, selKey)},
		{"the selector's label replaced", selected.Name, scopeImmutable, merge(`{"spec":{"selector":{"matchLabels":{%q:null,"nothing-carries":"this"}}}}`, selKey)},
		{"the selector's kinds", selected.Name, scopeImmutable, merge(`{"spec":{"selector":{"kinds":["ClusterRole"]}}}`)},
		{"an expression added to the selector", selected.Name, scopeImmutable,
			merge(`{"spec":{"selector":{"matchExpressions":[{"key":"nothing-carries","operator":"Exists"}]}}}`)},
		{"a target instead of the selector", selected.Name, scopeImmutable,
			merge(`{"spec":{"selector":null,"targetRef":{"apiVersion":"v1","kind":"Namespace","name":%q}}}`, prefix+"-elsewhere")},
	} {
		refused("changing the scope: "+tc.what, tc.name, true, tc.want, patch(tc.name, tc.patch))
	}

	// Deleting and the status: RBAC (dry runs: nothing is lost if RBAC
	// allowed them).
	refused("deleting", frozen.Name, false, `cannot delete resource "clusterlocks"`, func() error {
		return as.Delete(ctx, ref(frozen.Name), client.DryRunAll)
	})
	refused("deleting every ClusterLock", selected.Name, false, `cannot deletecollection resource "clusterlocks"`, func() error {
		return as.DeleteAllOf(ctx, &lockv1alpha1.ClusterLock{}, client.DryRunAll)
	})
	refused("writing the status", frozen.Name, false, `cannot patch resource "clusterlocks/status"`, func() error {
		return as.Status().Patch(ctx, ref(frozen.Name), merge(`{"status":{"active":false}}`), client.DryRunAll)
	})

	// Metadata is not protection: an owner the user adds does not lift
	// the ClusterLock (the garbage collector, which would delete it as its
	// owner does not exist, lacks the verb unlock); a status sent with the
	// main resource is dropped.
	owner := fmt.Sprintf(`[{"apiVersion":"v1","kind":"Namespace","name":%q,"uid":%q}]`, prefix+"-gone", types.UID(rand.String(12)))
	if err := as.Patch(ctx, ref(frozen.Name), merge(`{"metadata":{"labels":{"team":"platform"},"ownerReferences":%s},"status":{"active":false}}`, owner)); err != nil {
		t.Errorf("a %s holder adding a label and an owner to ClusterLock %s: %v", lockv1alpha1.ClusterLockRole, frozen.Name, err)
	}
	gc := impersonate(t, "system:serviceaccount:kube-system:generic-garbage-collector", "system:serviceaccounts", "system:serviceaccounts:kube-system")
	refused("the garbage collector deleting an owned ClusterLock", frozen.Name, false, decider+lockv1alpha1.ClusterUnlockMessage("deleting", frozen.Name), func() error {
		return gc.Delete(ctx, ref(frozen.Name), client.DryRunAll)
	})
	if cl := read(frozen.Name); len(cl.OwnerReferences) != 1 || !cl.Status.Active {
		t.Errorf("ClusterLock %s after the holder's metadata patch: ownerReferences %v, status.active %v; want the owner, and still active", frozen.Name, cl.OwnerReferences, cl.Status.Active)
	}

	// Raising: free.
	later := at(6 * time.Hour)
	if err := as.Patch(ctx, ref(frozen.Name), merge(`{"spec":{"expiresAt":%q,"reason":"freeze, extended"}}`, later)); err != nil {
		t.Errorf("a %s holder extending ClusterLock %s and changing its reason: %v", lockv1alpha1.ClusterLockRole, frozen.Name, err)
	}
	if cl := read(frozen.Name); cl.AsLock().ExpiresAtString() != later || cl.Spec.Reason != "freeze, extended" {
		t.Errorf("ClusterLock %s extended: expiresAt %s, reason %q; want %s, the new reason", frozen.Name, cl.AsLock().ExpiresAtString(), cl.Spec.Reason, later)
	}
	if err := as.Patch(ctx, ref(frozen.Name), merge(`{"spec":{"expiresAt":null}}`)); err != nil {
		t.Errorf("a %s holder removing ClusterLock %s's expiry: %v", lockv1alpha1.ClusterLockRole, frozen.Name, err)
	}
	refused("an expiresAt on the ClusterLock that no longer expires", frozen.Name, false, lowering(lockv1alpha1.LoweredExpiry, frozen.Name),
		patch(frozen.Name, merge(`{"spec":{"expiresAt":%q}}`, at(48*time.Hour))))
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		raise := read(selected.Name)
		raise.Spec.Level = lockv1alpha1.LevelReadOnly
		return as.Update(ctx, raise)
	}); err != nil {
		t.Errorf("a %s holder raising ClusterLock %s to ReadOnly (update): %v", lockv1alpha1.ClusterLockRole, selected.Name, err)
	}

	// Both still protect.
	for _, c := range []struct {
		ns *corev1.Namespace
		cl string
	}{{nsA, frozen.Name}, {nsB, selected.Name}} {
		err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.ns.Name}}, client.DryRunAll)
		if want := fmt.Sprintf("Namespace %s is protected by ClusterLock(s) [%s", c.ns.Name, c.cl); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("dry-run delete of Namespace %s after the attempts: %v; want Forbidden with %q", c.ns.Name, err, want)
		}
		framework.Eventually(t, framework.DefaultTimeout, "Namespace "+c.ns.Name+" labelled read-only", readOnlyLabelled(kube.Client, c.ns, true))
	}
	if cl := read(frozen.Name); cl.Spec.Level != lockv1alpha1.LevelReadOnly || cl.Spec.Enforcement != lockv1alpha1.EnforcementEnforce || cl.Spec.TargetRef.Name != nsA.Name || cl.Spec.ExpiresAt != nil {
		t.Errorf("ClusterLock %s at the end: spec %+v; want ReadOnly, Enforce, on %s, never expiring", frozen.Name, cl.Spec, nsA.Name)
	}
	waitClusterReadOnly(t, frozen.Name, lockv1alpha1.ReasonInForce)
	waitClusterReadOnly(t, selected.Name, lockv1alpha1.ReasonInForce)
}
