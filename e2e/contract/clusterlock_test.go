package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// clusterUnlockWebhook is how the API server prefixes the refusal of the
// chart's webhook entry cluster-unlock.lockguard.core.navique.com.
const clusterUnlockWebhook = `admission webhook "cluster-unlock.lockguard.core.navique.com" denied the request: `

// applyClusterUnlockPolicy applies the chart's cluster-unlock
// ValidatingAdmissionPolicy and its binding, rendered for the release
// named release (applyChartPolicy), bound to the ClusterLocks labelled
// labels alone (objectSelector), and returns how the API server prefixes
// its refusals. The suite's webhook entry still answers for those
// ClusterLocks, after the policy: a refusal is the policy's once it is
// loaded.
func applyClusterUnlockPolicy(t *testing.T, release string, labels map[string]string) string {
	t.Helper()
	match := map[string]any{}
	for k, v := range labels {
		match[k] = v
	}
	return applyChartPolicy(t, framework.Release{Name: release, Namespace: "lockguard-cluster-unlock"}, release+"-lockguard-cluster-unlock", "objectSelector",
		map[string]any{"matchLabels": match})
}

// eachClusterUnlockDecider runs check twice, once for each place that
// refuses lowering or deleting a ClusterLock without the verb unlock:
// the subtest "webhook", through the suite's cluster-unlock webhook entry
// (as on 1.29), check given the prefix tag-RANDOM, clusterUnlockWebhook
// and no labels; and, where the API server serves
// admissionregistration.k8s.io/v1 policies (skipWithoutPolicies), the
// subtest "policy", through the chart's cluster-unlock
// ValidatingAdmissionPolicy of the release lg-tag bound to the ClusterLocks
// labelled tag-policy-test=RANDOM alone (applyClusterUnlockPolicy), check
// given the prefix tagp-RANDOM, the policy's prefix and those labels, to
// put on the ClusterLocks it makes.
func eachClusterUnlockDecider(t *testing.T, tag string, check func(t *testing.T, prefix, decider string, labels map[string]string)) {
	t.Helper()
	t.Run("webhook", func(t *testing.T) {
		check(t, tag+"-"+rand.String(5), clusterUnlockWebhook, nil)
	})
	t.Run("policy", func(t *testing.T) {
		skipWithoutPolicies(t)
		suffix := rand.String(5)
		labels := map[string]string{tag + "-policy-test": suffix}
		check(t, tag+"p-"+suffix, applyClusterUnlockPolicy(t, "lg-"+tag, labels), labels)
	})
}

// TestClusterLock (docs/contract.md rule 22, by name): a ClusterLock on a
// Namespace (which holds no Lock), a CustomResourceDefinition and a
// ClusterRole becomes Active and labels its target; deleting each target
// is refused, dry run or not, naming the ClusterLock, its reason and the
// role that unlocks; a user who may patch the target cannot remove the
// label; deleting the ClusterLock without the verb unlock is refused
// naming the verb (the suite's webhook entry, as before 1.30), with
// lockguard-cluster-unlock it succeeds, the label goes and the target can
// be deleted.
func TestClusterLock(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	admin := withCRDs(t)
	suffix := rand.String(5)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clk-ns-" + suffix}}
	crd := clusterLockCRD("clk" + suffix)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "clk-role-" + suffix}}
	targets := []struct {
		obj        client.Object
		apiVersion string
		kind       string
	}{
		{ns, "v1", "Namespace"},
		{crd, "apiextensions.k8s.io/v1", "CustomResourceDefinition"},
		{role, "rbac.authorization.k8s.io/v1", "ClusterRole"},
	}
	var locks []*lockv1alpha1.ClusterLock
	for _, tg := range targets {
		if err := admin.Create(ctx, tg.obj); err != nil {
			t.Fatal(err)
		}
		cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "clk-" + strings.ToLower(tg.kind) + "-" + suffix},
			Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: tg.apiVersion, Kind: tg.kind, Name: tg.obj.GetName()},
				Reason: "platform " + tg.kind}}
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
		kube.WaitClusterLock(t, cl.Name, lockv1alpha1.ReasonActive, fmt.Sprintf("deleting %s %q is denied while this ClusterLock exists: platform %s", tg.kind, tg.obj.GetName(), tg.kind))
		framework.Eventually(t, framework.DefaultTimeout, tg.kind+" labelled", clusterLabelled(admin, tg.obj, true))
		for _, opts := range [][]client.DeleteOption{{client.DryRunAll}, nil} {
			err := admin.Delete(ctx, tg.obj, opts...)
			want := fmt.Sprintf(`%s %s is protected by ClusterLock(s) [%s (reason: "platform %s")]; delete the ClusterLock(s) before deleting it (deleting a ClusterLock needs the verb "unlock" on it: the ClusterRole lockguard-cluster-unlock)`,
				tg.kind, tg.obj.GetName(), cl.Name, tg.kind)
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
				t.Fatalf("deleting %s %s (options %v): %v; want Forbidden with %q", tg.kind, tg.obj.GetName(), opts, err, want)
			}
		}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(tg.obj), tg.obj); err != nil || tg.obj.GetDeletionTimestamp() != nil {
			t.Fatalf("%s %s after refused deletes: %v, deletionTimestamp %v; want it untouched", tg.kind, tg.obj.GetName(), err, tg.obj.GetDeletionTimestamp())
		}
	}

	// A user who may patch Namespaces cannot take the label off (and so
	// the namespace out of the guard's objectSelector).
	user := "clk-user-" + suffix
	bindCluster(t, user, clusterRole(t, "clk-patch-ns-"+suffix, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "patch", "update"}}))
	as := impersonate(t, user)
	for _, value := range []any{nil, "false"} {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, lockv1alpha1.ClusterLockedLabel, jsonValue(value)))
		err := as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, patch)
		want := fmt.Sprintf("the label %s=true on Namespace %s is kept by lockguard while ClusterLock(s) [%s", lockv1alpha1.ClusterLockedLabel, ns.Name, locks[0].Name)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("a user setting the label to %v: %v; want Forbidden with %q", value, err, want)
		}
	}
	// Other label changes by the same user are not refused.
	if err := as.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"platform"}}}`))); err != nil {
		t.Fatalf("another label: %v", err)
	}
	framework.Eventually(t, framework.DefaultTimeout, "Namespace still labelled", clusterLabelled(admin, ns, true))

	// Unlocking: lockguard-cluster-lock and delete on clusterlocks without
	// the verb unlock is refused, naming it; lockguard-cluster-unlock
	// lifts the ClusterLock.
	bindCluster(t, user, lockv1alpha1.ClusterLockRole)
	bindCluster(t, user, clusterRole(t, "clk-delete-"+suffix, rbacv1.PolicyRule{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"clusterlocks"}, Verbs: []string{"delete"}}))
	for _, cl := range locks {
		err := as.Delete(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: cl.Name}})
		want := clusterUnlockWebhook + lockv1alpha1.ClusterUnlockMessage("deleting", cl.Name)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), lockv1alpha1.ClusterUnlockRefusal) {
			t.Fatalf("deleting ClusterLock %s without unlock: %v; want %q", cl.Name, err, want)
		}
	}
	bindCluster(t, user, lockv1alpha1.ClusterUnlockRole)
	for i, tg := range targets {
		cl := locks[i]
		framework.Eventually(t, framework.DefaultTimeout, "ClusterLock "+cl.Name+" deleted with lockguard-cluster-unlock", func(ctx context.Context) error {
			return client.IgnoreNotFound(as.Delete(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: cl.Name}}))
		})
		framework.Eventually(t, framework.DefaultTimeout, tg.kind+" unlabelled", clusterLabelled(admin, tg.obj, false))
		if err := admin.Delete(ctx, tg.obj); err != nil {
			t.Fatalf("deleting %s %s once unlocked: %v", tg.kind, tg.obj.GetName(), err)
		}
	}
}

// TestClusterLockInvalidTarget (rule 22, rule 13): a ClusterLock on a kind
// it cannot protect (a namespaced Pod, a core.navique.com kind that is not
// served) is InvalidTarget and says why; one on a Namespace that does not
// exist is MissingReference, and Active once the namespace is created.
func TestClusterLockInvalidTarget(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	cases := []struct {
		ref    lockv1alpha1.ClusterTargetReference
		reason string
		says   string
	}{
		{lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Pod", Name: "p"}, lockv1alpha1.ReasonInvalidTarget, "a ClusterLock cannot protect a Pod"},
		{lockv1alpha1.ClusterTargetReference{APIVersion: "core.navique.com/v1alpha1", Kind: "NoSuchKind", Name: "x"}, lockv1alpha1.ReasonInvalidTarget, "no kind NoSuchKind.core.navique.com is served by the API server"},
		{lockv1alpha1.ClusterTargetReference{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "x"}, lockv1alpha1.ReasonInvalidTarget, "Stack.core.navique.com is a namespaced kind: protect its objects with a Lock"},
		{lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: "clk-later-" + suffix}, lockv1alpha1.ReasonMissingReference, fmt.Sprintf(`Namespace "clk-later-%s" not found`, suffix)},
	}
	for i, c := range cases {
		cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("clk-invalid-%d-%s", i, suffix)}, Spec: lockv1alpha1.ClusterLockSpec{TargetRef: c.ref}}
		if err := kube.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), cl) })
		kube.WaitClusterLock(t, cl.Name, c.reason, c.says)
	}
	later := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clk-later-" + suffix}}
	if err := kube.Client.Create(ctx, later); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), later) })
	kube.WaitClusterLock(t, fmt.Sprintf("clk-invalid-3-%s", suffix), lockv1alpha1.ReasonActive, "")
	framework.Eventually(t, framework.DefaultTimeout, "the later namespace labelled", clusterLabelled(kube.Client, later, true))
	if err := kube.Client.Delete(ctx, later, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Fatalf("deleting the namespace created after its ClusterLock: %v; want Forbidden", err)
	}
}

// clusterLabelled checks, through c, that obj carries ClusterLockedLabel=true (want) or
// not.
func clusterLabelled(c client.Client, obj client.Object, want bool) func(context.Context) error {
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
		if got := m.Labels[lockv1alpha1.ClusterLockedLabel] == "true"; got != want {
			return fmt.Errorf("%s %s labels %v; want %s=true: %v", gvk.Kind, obj.GetName(), m.Labels, lockv1alpha1.ClusterLockedLabel, want)
		}
		return nil
	}
}

// clusterLockCRD is a CRD of a test group (not core.navique.com: the CRD
// guard leaves it alone), plural name.
func clusterLockCRD(name string) *apiextensionsv1.CustomResourceDefinition {
	group := "clk.example.com"
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name + "s." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: name + "s", Singular: name, Kind: "Clk" + name, ListKind: "Clk" + name + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
}

// clusterRole creates a ClusterRole of rules and returns its name.
func clusterRole(t *testing.T, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	r := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if err := client.IgnoreAlreadyExists(kube.Client.Create(t.Context(), r)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), r) })
	return name
}

// bindCluster binds user to ClusterRole role cluster-wide.
func bindCluster(t *testing.T, user, role string) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if err := client.IgnoreAlreadyExists(kube.Client.Create(t.Context(), b)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), b) })
	kube.WaitGranted(t, user, "", b.RoleRef)
}

// jsonValue is v in JSON: null for nil, a quoted string otherwise.
func jsonValue(v any) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", v)
}

// withCRDs returns an admin client whose scheme knows
// CustomResourceDefinitions besides lockguard's types.
func withCRDs(t *testing.T) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, lockv1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	c, err := client.New(suite.env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClusterUnlockPolicy (rule 22, rule 18 on 1.30+): the chart's
// cluster-unlock ValidatingAdmissionPolicy, rendered as for a 1.30+ API
// server and bound to one test ClusterLock (objectSelector), refuses its
// delete by a user without the verb unlock, naming the verb, in the API
// server; with lockguard-cluster-unlock the delete succeeds.
func TestClusterUnlockPolicy(t *testing.T) {
	inProcess(t)
	skipWithoutPolicies(t)
	ctx := t.Context()
	suffix := rand.String(5)
	labels := map[string]string{"clk-policy-test": suffix}
	decider := applyClusterUnlockPolicy(t, "lg-cu", labels)
	cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "clk-policy-" + suffix, Labels: labels},
		Spec: lockv1alpha1.ClusterLockSpec{TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: "clk-policy-absent-" + suffix}}}
	if err := kube.Client.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), cl) })
	user := "clk-policy-user-" + suffix
	bindCluster(t, user, clusterRole(t, "clk-policy-delete-"+suffix, rbacv1.PolicyRule{APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"clusterlocks"}, Verbs: []string{"delete"}}))
	as := impersonate(t, user)
	want := decider + lockv1alpha1.ClusterUnlockMessage("deleting", cl.Name)
	framework.Eventually(t, framework.DefaultTimeout, "the policy refuses deleting the ClusterLock", func(ctx context.Context) error {
		err := as.Delete(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: cl.Name}}, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("dry-run delete without unlock: %v; want %q", err, want)
		}
		return nil
	})
	bindCluster(t, user, lockv1alpha1.ClusterUnlockRole)
	framework.Eventually(t, framework.DefaultTimeout, "deleting the ClusterLock with lockguard-cluster-unlock", func(ctx context.Context) error {
		return as.Delete(ctx, &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: cl.Name}})
	})
}

// TestClusterLockProtectsFromCreate (docs/contract.md rule 22): a
// ClusterLock protects from its create's answer, as a Lock does. Its
// create labels the target before it is allowed (the chart's
// cluster-create entry), so a DELETE of the Namespace it names, sent as
// soon as the create returns, is refused, every time over 20 iterations
// (each on a Namespace of its own, never labelled before).
func TestClusterLockProtectsFromCreate(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	suffix := rand.String(5)
	const iterations = 20
	var done []client.Object
	for i := range iterations {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("clk-fast-%s-%d", suffix, i)}}
		if err := kube.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		cl := &lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}, Spec: lockv1alpha1.ClusterLockSpec{
			TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: ns.Name}, Reason: "fast"}}
		t.Cleanup(func() {
			_ = kube.Client.Delete(context.Background(), cl)
			_ = kube.Client.Delete(context.Background(), ns)
		})
		done = append(done, cl, ns)
		if err := kube.Client.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		err := kube.Client.Delete(ctx, ns)
		want := fmt.Sprintf(`Namespace %s is protected by ClusterLock(s) [%s (reason: "fast")]`, ns.Name, cl.Name)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
			t.Fatalf("iteration %d: deleting namespace %s right after its ClusterLock's create: %v; want Forbidden with %q", i, ns.Name, err, want)
		}
	}
	t.Logf("%d of %d deletes sent right after the create refused", iterations, iterations)
	// Once the ClusterLocks go, the Namespaces can be deleted.
	for i := 0; i < len(done); i += 2 {
		if err := kube.Client.Delete(ctx, done[i]); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < len(done); i += 2 {
		framework.Eventually(t, framework.DefaultTimeout, "namespace "+done[i].GetName()+" deleted", func(ctx context.Context) error {
			return client.IgnoreNotFound(kube.Client.Delete(ctx, done[i]))
		})
	}
}
