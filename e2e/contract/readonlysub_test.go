package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// TestReadOnlySubresources: the scale subresource of a kind that serves
// one is frozen under a ReadOnly Lock like the spec it writes (issue 36):
// a person's scale (a PATCH of /scale, dry run alike) is refused, naming
// the Lock, whether a targetRef or a selector Lock covers the object (the
// API server's scale reviews carry autoscaling/v1 Scale objects, without
// the object's labels: lockguard reads them), and the spec is unchanged;
// the scale of an object in the same namespace that no ReadOnly Lock
// covers, the exempt navique operator's scale and a status update go
// through. A scale in a namespace without Locks never calls lockguard
// (docs/contract.md rule 7).
func TestReadOnlySubresources(t *testing.T) {
	inProcess(t)
	gvk := scaledKind(t)
	ns := kube.NewNamespace(t, "rosub")
	for name, tier := range map[string]string{"web": "web", "db": "db", "free": "free"} {
		createScaled(t, gvk, ns, name, tier)
	}
	named := framework.NewLock(ns, "freeze-web", gvk.Kind, "web", "change window")
	named.Spec.Level = lockv1alpha1.LevelReadOnly
	named = kube.CreateLock(t, named)
	selected := framework.NewSelectorLock(ns, "freeze-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}})
	selected.Spec.Level = lockv1alpha1.LevelReadOnly
	selected = kube.CreateLock(t, selected)
	waitReadOnly(t, named, lockv1alpha1.ReasonInForce)
	waitReadOnly(t, selected, lockv1alpha1.ReasonInForce)

	person := scaler(t, gvk, ns, "jane@example.com")
	scale := func(c client.Client, name string, replicas int, opts ...client.SubResourcePatchOption) error {
		patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
		return c.SubResource("scale").Patch(t.Context(), framework.Object(gvk, ns, name), patch, opts...)
	}
	for name, l := range map[string]*lockv1alpha1.Lock{"web": named, "db": selected} {
		t.Run("Refused/"+name, func(t *testing.T) {
			want := webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*l}, "the scale subresource")
			wantRefused(t, scale(person, name, 5), want)
			wantRefused(t, scale(person, name, 5, client.DryRunAll), want)
			wantReplicas(t, gvk, ns, name, 1)
		})
	}
	t.Run("NotCoveredAllowed", func(t *testing.T) {
		if err := scale(person, "free", 3); err != nil {
			t.Errorf("scaling %s free, under no ReadOnly Lock: %v; want it allowed", gvk.Kind, err)
		}
		wantReplicas(t, gvk, ns, "free", 3)
	})
	t.Run("ExemptAllowed", func(t *testing.T) {
		if err := scale(scaler(t, gvk, ns, naviqueOperator, "system:serviceaccounts"), "web", 2); err != nil {
			t.Errorf("scaling %s web by the exempt %s: %v; want it allowed", gvk.Kind, naviqueOperator, err)
		}
		wantReplicas(t, gvk, ns, "web", 2)
	})
	t.Run("StatusAllowed", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"replicas":1}}`))
		if err := person.Status().Patch(t.Context(), framework.Object(gvk, ns, "db"), patch); err != nil {
			t.Errorf("status update of a ReadOnly object: %v; want it allowed", err)
		}
	})
	t.Run("NoLocksNeverAsked", func(t *testing.T) {
		quiet := kube.NewNamespace(t, "rosubquiet")
		createScaled(t, gvk, quiet, "web", "web")
		before := readOnlyReviews(t)
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":4}}`))
		if err := kube.Client.SubResource("scale").Patch(t.Context(), framework.Object(gvk, quiet, "web"), patch); err != nil {
			t.Fatalf("scaling %s web in a namespace without Locks: %v", gvk.Kind, err)
		}
		if after := readOnlyReviews(t); after != before {
			t.Errorf("lockguard answered %v update reviews for a scale in a namespace without Locks; want none", after-before)
		}
	})
}

// scaledKind installs a namespaced kind of the group, of its own for
// each run, that serves the status and scale subresources
// (.spec.replicas), and returns it.
func scaledKind(t *testing.T) schema.GroupVersionKind {
	t.Helper()
	kind := "Scaler" + rand.String(5)
	plural := strings.ToLower(kind) + "s"
	preserve := true
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + ".core.navique.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "core.navique.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}},
				Subresources: &apiextensionsv1.CustomResourceSubresources{
					Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
					Scale:  &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"},
				},
			}},
		},
	}
	crds := []*apiextensionsv1.CustomResourceDefinition{crd}
	if err := envtest.CreateCRDs(suite.env.Config, crds); err != nil {
		t.Fatal(err)
	}
	if err := envtest.WaitForCRDs(suite.env.Config, crds, envtest.CRDInstallOptions{MaxTime: 30 * time.Second, PollInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = kube.Client.Delete(context.Background(), crd) })
	return schema.GroupVersionKind{Group: "core.navique.com", Version: "v1", Kind: kind}
}

// createScaled creates the object ns/name of kind gvk (scaledKind) with
// one replica and the label tier.
func createScaled(t *testing.T, gvk schema.GroupVersionKind, ns, name, tier string) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"replicas": int64(1)}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(map[string]string{"tier": tier})
	if err := kube.Client.Create(t.Context(), u); err != nil {
		t.Fatalf("creating %s %s/%s: %v", gvk.Kind, ns, name, err)
	}
}

// wantReplicas checks that the object ns/name of kind gvk has
// spec.replicas want.
func wantReplicas(t *testing.T, gvk schema.GroupVersionKind, ns, name string, want int64) {
	t.Helper()
	u, err := kube.GetObject(t.Context(), gvk, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); got != want {
		t.Errorf("%s %s spec.replicas %d, want %d", gvk.Kind, name, got, want)
	}
}

// scaler returns a client acting as user in groups (and
// system:authenticated) that may get, update and patch the objects of
// kind gvk (scaledKind) in ns, their status and their scale, once it can
// read them.
func scaler(t *testing.T, gvk schema.GroupVersionKind, ns, user string, groups ...string) client.Client {
	t.Helper()
	plural := strings.ToLower(gvk.Kind) + "s"
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "scaler-"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{gvk.Group}, Resources: []string{plural, plural + "/status", plural + "/scale"}, Verbs: []string{"get", "update", "patch"}}}}
	if err := kube.Client.Create(t.Context(), role); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if err := kube.Client.Create(t.Context(), binding); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(restConfig(t))
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, _ := framework.WarningClient(t, cfg)
	framework.Eventually(t, framework.DefaultTimeout, user+" can read "+plural, func(ctx context.Context) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, u)
	})
	return c
}
