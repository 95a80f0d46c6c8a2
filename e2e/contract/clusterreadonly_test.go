package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestClusterReadOnly (docs/contract.md rules 16 and 22): a ReadOnly
// ClusterLock on a Namespace, a CustomResourceDefinition and a
// ClusterRole labels its target read-only and says InForce; a person's
// label, annotation and spec changes (PATCH and UPDATE, dry run alike)
// and the label's removal are refused naming the ClusterLock and the
// level, the same change by the exempt navique operator and a status
// update are allowed, the delete is still refused; lowering the level
// without the verb unlock is refused (the suite's cluster-unlock webhook
// entry, as before 1.30), with it the freeze lifts: lockguard's own write
// takes the label off and the person's change goes through. A CanNotDelete
// ClusterLock leaves updates alone; raised to ReadOnly again by an update,
// it refuses them once InForce. A StorageClass is frozen alike.
func TestClusterReadOnly(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	admin := withCRDs(t)
	suffix := rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cro-ns-" + suffix}}
	crd := clusterLockCRD("cro" + suffix)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cro-role-" + suffix}}
	class := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "cro-class-" + suffix}, Provisioner: "example.com/cro"}
	targets := []struct {
		obj        client.Object
		apiVersion string
		kind       string
		resource   string
		group      string
		// change is a person's merge patch of what the level freezes, and
		// field the first frozen field it changes.
		change, field string
	}{
		{ns, "v1", "Namespace", "namespaces", "", `{"metadata":{"annotations":{"note":"x"}}}`, "metadata.annotations[note]"},
		{crd, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "customresourcedefinitions", "apiextensions.k8s.io", `{"spec":{"names":{"shortNames":["cro` + suffix + `"]}}}`, "spec"},
		{role, "rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", "rbac.authorization.k8s.io", `{"rules":[{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}]}`, "rules"},
		{class, "storage.k8s.io/v1", "StorageClass", "storageclasses", "storage.k8s.io", `{"allowVolumeExpansion":true}`, "allowVolumeExpansion"},
	}
	// A person who may update and patch every target (escalate: any rules
	// in a ClusterRole), and the namespace's status.
	person, operator := "cro-user-"+suffix, naviqueOperator
	updater := clusterRole(t, "cro-update-"+suffix,
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces", "namespaces/status"}, Verbs: []string{"get", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "update", "patch", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"get", "update", "patch", "delete", "escalate"}},
		rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "update", "patch", "delete"}})
	bindCluster(t, person, updater)
	bindCluster(t, operator, updater)
	as, asOperator := impersonateWith(t, admin, person), impersonateWith(t, admin, operator)

	var locks []*lockv1alpha1.ClusterLock
	for _, tg := range targets {
		if err := admin.Create(ctx, tg.obj); err != nil {
			t.Fatal(err)
		}
		cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "cro-" + strings.ToLower(tg.kind) + "-" + suffix},
			Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: tg.apiVersion, Kind: tg.kind, Name: tg.obj.GetName()},
				Reason: "freeze " + tg.kind, Level: lockv1alpha1.LevelReadOnly}}
		if err := kube.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		locks = append(locks, cl)
		t.Cleanup(func() {
			_ = kube.Client.Delete(context.Background(), cl)
			_ = admin.Delete(context.Background(), tg.obj)
		})
	}
	for i, tg := range targets {
		cl := locks[i]
		kube.WaitClusterLock(t, cl.Name, lockv1alpha1.ReasonActive, "")
		waitClusterReadOnly(t, cl.Name, lockv1alpha1.ReasonInForce)
		if err := readOnlyLabelled(admin, tg.obj, true)(ctx); err != nil {
			t.Fatalf("once the ClusterLock is InForce: %v", err)
		}
		obj := func() client.Object {
			o := &metav1.PartialObjectMetadata{}
			gvk, _ := admin.GroupVersionKindFor(tg.obj)
			o.SetGroupVersionKind(gvk)
			o.SetName(tg.obj.GetName())
			return o
		}
		patch := func(c client.Client, body string, opts ...client.PatchOption) error {
			return c.Patch(ctx, obj(), client.RawPatch(types.MergePatchType, []byte(body)), opts...)
		}
		refusal := func(field string) string {
			return webhook.ClusterUpdateDenialMessage(tg.kind, tg.obj.GetName(), []lockv1alpha1.ClusterLock{*cl}, field)
		}
		t.Run(tg.kind, func(t *testing.T) {
			// A person's changes: the frozen field, a label, the
			// read-only label's removal; dry run alike.
			wantRefused(t, patch(as, tg.change), refusal(tg.field))
			wantRefused(t, patch(as, tg.change, client.DryRunAll), refusal(tg.field))
			wantRefused(t, patch(as, `{"metadata":{"labels":{"team":"x"}}}`), refusal("metadata.labels[team]"))
			wantRefused(t, patch(as, fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, lockv1alpha1.ReadOnlyLabel)),
				refusal("metadata.labels["+lockv1alpha1.ReadOnlyLabel+"]"))
			// An UPDATE (not a patch) of the whole object: a label added.
			full := tg.obj.DeepCopyObject().(client.Object)
			if err := as.Get(ctx, client.ObjectKeyFromObject(tg.obj), full); err != nil {
				t.Fatal(err)
			}
			labels := full.GetLabels()
			labels["team"] = "y"
			full.SetLabels(labels)
			wantRefused(t, as.Update(ctx, full), refusal("metadata.labels[team]"))
			// The delete is still refused.
			if err := as.Delete(ctx, obj(), client.DryRunAll); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "is protected by ClusterLock(s) ["+cl.Name) {
				t.Errorf("deleting %s %s: %v; want the ClusterLock's refusal", tg.kind, tg.obj.GetName(), err)
			}
			// The exempt navique operator's change goes through.
			if err := patch(asOperator, tg.change); err != nil {
				t.Errorf("the same change by the exempt %s: %v; want it allowed", operator, err)
			}
		})
	}
	t.Run("StatusAllowed", func(t *testing.T) {
		status := fmt.Sprintf(`{"status":{"conditions":[{"type":"CroTest","status":"True","reason":"Test","message":"%s","lastTransitionTime":"2026-12-04T00:00:00Z"}]}}`, suffix)
		if err := as.Status().Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.RawPatch(types.MergePatchType, []byte(status))); err != nil {
			t.Errorf("a status update of the frozen Namespace: %v; want it allowed", err)
		}
	})

	// Lowering the level needs the verb unlock; with it, lockguard takes
	// the label off (its own write, exempt), and the person's change goes
	// through.
	bindCluster(t, person, lockv1alpha1.ClusterLockRole)
	lower := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"level":"CanNotDelete"}}`))
	nsLock := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: locks[0].Name}}
	err := as.Patch(ctx, nsLock, lower)
	if want := clusterUnlockWebhook + lockv1alpha1.ClusterUnlockMessage("lowering the level of", nsLock.Name); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("lowering the level without unlock: %v; want %q", err, want)
	}
	bindCluster(t, person, lockv1alpha1.ClusterUnlockRole)
	framework.Eventually(t, framework.DefaultTimeout, "lowering the level with lockguard-cluster-unlock", func(ctx context.Context) error {
		return as.Patch(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: nsLock.Name}}, lower)
	})
	framework.Eventually(t, framework.DefaultTimeout, "Namespace unlabelled read-only", readOnlyLabelled(admin, ns, false))
	framework.Eventually(t, framework.DefaultTimeout, "no ReadOnly condition", func(ctx context.Context) error {
		var cl lockv1alpha1.ClusterLock
		if err := kube.Client.Get(ctx, client.ObjectKey{Name: nsLock.Name}, &cl); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cl.Status.Conditions, lockv1alpha1.ConditionReadOnly); c != nil {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	if err := as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"z"}}}`))); err != nil {
		t.Errorf("a label change under the CanNotDelete ClusterLock: %v; want it allowed", err)
	}
	if err := clusterLabelled(admin, ns, true)(ctx); err != nil {
		t.Errorf("the CanNotDelete ClusterLock's label: %v", err)
	}
	if err := as.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("deleting the Namespace under the CanNotDelete ClusterLock: %v; want Forbidden", err)
	}

	// Raised to ReadOnly again by an update (which no create admits): in
	// force once the reconciler has labelled the target, and from then on
	// the person's change is refused.
	if err := as.Patch(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: nsLock.Name}}, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"level":"ReadOnly"}}`))); err != nil {
		t.Fatalf("raising the level: %v", err)
	}
	waitClusterReadOnly(t, nsLock.Name, lockv1alpha1.ReasonInForce)
	if err := readOnlyLabelled(admin, ns, true)(ctx); err != nil {
		t.Fatalf("once InForce again: %v", err)
	}
	var raised lockv1alpha1.ClusterLock
	if err := kube.Client.Get(ctx, client.ObjectKey{Name: nsLock.Name}, &raised); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"w"}}}`))),
		webhook.ClusterUpdateDenialMessage("Namespace", ns.Name, []lockv1alpha1.ClusterLock{raised}, "metadata.labels[team]"))
}

// TestClusterReadOnlyFromCreate (rules 16 and 22): a ReadOnly ClusterLock
// freezes from its create's answer: the create puts the read-only label
// on its target before it is allowed, so a person's label change of the
// Namespace it names, sent as soon as the create returns, is refused,
// every time over 20 iterations (each on a Namespace of its own).
func TestClusterReadOnlyFromCreate(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	const iterations = 20
	// A person (kube.Client is lockguard's own identity in this suite:
	// exempt).
	person := "cro-fast-user-" + suffix
	bindCluster(t, person, clusterRole(t, "cro-fast-patch-"+suffix, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "patch"}}))
	as := impersonate(t, person)
	for i := range iterations {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cro-fast-%s-%d", suffix, i)}}
		if err := kube.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}, Spec: lockv1alpha1.ClusterLockSpec{
			TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: ns.Name}, Reason: "fast", Level: lockv1alpha1.LevelReadOnly}}
		t.Cleanup(func() {
			_ = kube.Client.Delete(context.Background(), cl)
			_ = kube.Client.Delete(context.Background(), ns)
		})
		if err := kube.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		err := as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"x"}}}`)))
		want := webhook.ClusterUpdateDenialMessage("Namespace", ns.Name, []lockv1alpha1.ClusterLock{*cl}, "metadata.labels[team]")
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("iteration %d: a label change of namespace %s right after its ReadOnly ClusterLock's create: %v; want Forbidden with %q", i, ns.Name, err, want)
		}
	}
	t.Logf("%d of %d updates sent right after the create refused", iterations, iterations)
}

// TestClusterReadOnlyUnlockPolicy (rules 18 and 22, on 1.30+): the chart's
// cluster-unlock ValidatingAdmissionPolicy refuses lowering a ClusterLock's
// level from ReadOnly without the verb unlock, in the API server.
func TestClusterReadOnlyUnlockPolicy(t *testing.T) {
	inProcess(t)
	skipWithoutPolicies(t)
	ctx := t.Context()
	suffix := rand.String(5)
	labels := map[string]string{"cro-policy-test": suffix}
	decider := applyClusterUnlockPolicy(t, "lg-cro", labels)
	cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "cro-policy-" + suffix, Labels: labels},
		Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: "cro-policy-absent-" + suffix},
			Level: lockv1alpha1.LevelReadOnly}}
	if err := kube.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), cl) })
	user := "cro-policy-user-" + suffix
	bindCluster(t, user, clusterRole(t, "cro-policy-update-"+suffix, rbacv1.PolicyRule{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"clusterlocks"}, Verbs: []string{"get", "patch"}}))
	as := impersonate(t, user)
	want := decider + lockv1alpha1.ClusterUnlockMessage("lowering the level of", cl.Name)
	lower := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"level":"CanNotDelete"}}`))
	framework.Eventually(t, framework.DefaultTimeout, "the policy refuses lowering the level", func(ctx context.Context) error {
		err := as.Patch(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: cl.Name}}, lower, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("dry-run lowering without unlock: %v; want %q", err, want)
		}
		return nil
	})
}

// impersonateWith is impersonate with the scheme of c (withCRDs': CRDs
// too).
func impersonateWith(t *testing.T, c client.Client, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(suite.env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	as, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// waitClusterReadOnly waits until ClusterLock name's ReadOnly condition has
// reason.
func waitClusterReadOnly(t *testing.T, name, reason string) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, "ClusterLock "+name+" ReadOnly "+reason, func(ctx context.Context) error {
		var cl lockv1alpha1.ClusterLock
		if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil {
			return err
		}
		c := meta.FindStatusCondition(cl.Status.Conditions, lockv1alpha1.ConditionReadOnly)
		if c == nil || c.Reason != reason {
			return fmt.Errorf("ReadOnly condition %+v", c)
		}
		return nil
	})
}

// readOnlyLabelled checks, through c, that obj carries ReadOnlyLabel=true
// (want) or not.
func readOnlyLabelled(c client.Client, obj client.Object, want bool) func(context.Context) error {
	return func(ctx context.Context) error {
		m := &metav1.PartialObjectMetadata{}
		gvk, err := c.GroupVersionKindFor(obj)
		if err != nil {
			return err
		}
		m.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), m); err != nil {
			return err
		}
		if got := m.Labels[lockv1alpha1.ReadOnlyLabel] == "true"; got != want {
			return fmt.Errorf("%s %s labels %v; want %s=true: %v", gvk.Kind, obj.GetName(), m.Labels, lockv1alpha1.ReadOnlyLabel, want)
		}
		return nil
	}
}

// TestClusterReadOnlyPluginAndWhy (rules 16 and 22): `kubectl lock
// namespace/NAME --read-only` creates a ReadOnly ClusterLock and waits
// until the freeze is in force; `kubectl lock why namespace/NAME` answers
// the update question for the user who asks, from lockguard's cluster
// update guard: refused for a person, with the guard's message, allowed for
// the exempt navique operator.
func TestClusterReadOnlyPluginAndWhy(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cro-why-" + suffix}}
	if err := kube.Client.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	name := "namespace-" + ns.Name
	t.Cleanup(func() {
		_ = kube.Client.Delete(context.Background(), &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}})
		_ = kube.Client.Delete(context.Background(), ns)
	})
	r := kubectlLock(t, "", "namespace/"+ns.Name, "--read-only", "--reason", "freeze")
	if want := "namespace/" + ns.Name + " is locked read-only"; r.err != nil || !strings.Contains(r.stdout, want) {
		t.Fatalf("kubectl lock namespace/%s --read-only: err %v, stdout %q; want %q", ns.Name, r.err, r.stdout, want)
	}
	var cl lockv1alpha1.ClusterLock
	if err := kube.Client.Get(ctx, client.ObjectKey{Name: name}, &cl); err != nil || cl.Spec.Level != lockv1alpha1.LevelReadOnly {
		t.Fatalf("ClusterLock %s: %v, level %q; want ReadOnly", name, err, cl.Spec.Level)
	}
	// What why reads, and the namespace's patch, for both users.
	person := "cro-why-user-" + suffix
	reader := clusterRole(t, "cro-why-read-"+suffix,
		rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"patch"}})
	bindCluster(t, person, reader)
	bindCluster(t, naviqueOperator, reader)

	w := kubectlWhy(t, "namespace/"+ns.Name, "--as", person, "--as-group", "system:authenticated")
	wantDenial := webhook.ClusterUpdateDenialMessage("Namespace", ns.Name, []lockv1alpha1.ClusterLock{cl}, "metadata.annotations[kubectl-lock.core.navique.com/why]")
	if u := w.Update; u == nil || !u.Frozen || !u.InForce || !u.Asked || !u.Refused || u.User != person || !strings.HasSuffix(u.Answer, "denied the request: "+wantDenial) {
		t.Errorf("why namespace/%s as %s: update %+v; want refused for them with %q", ns.Name, person, w.Update, wantDenial)
	}
	w = kubectlWhy(t, "namespace/"+ns.Name, "--as", naviqueOperator, "--as-group", "system:authenticated")
	if u := w.Update; u == nil || !u.Frozen || !u.InForce || !u.Asked || u.Refused || u.Answer != "allowed" {
		t.Errorf("why namespace/%s as the exempt %s: update %+v; want frozen and in force, not refused for it", ns.Name, naviqueOperator, w.Update)
	}
}
