//go:build e2e

package chart_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// testUnlockPolicy applies the chart's unlock policy, its binding and the
// ClusterRole lockguard-unlock alone, with no webhook and no lockguard
// running, and checks that the API server itself refuses deleting a Lock
// and lowering its level to a user with delete and update on Locks but
// without the verb unlock, with api/v1alpha1's messages, and allows both
// once the user is bound to lockguard-unlock: lockguard's state never
// changes the answer (docs/contract.md rule 18).
func testUnlockPolicy(ctx context.Context, t *testing.T, env *framework.Env, c client.Client, kubeVersion string, apiVersions []string) {
	objs, err := framework.Render(ctx, framework.Release{Name: "lockguard", Namespace: "lockguard-system",
		KubeVersion: kubeVersion, APIVersions: apiVersions, IncludeCRDs: true})
	if err != nil {
		t.Fatal(err)
	}
	var apply []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case o.GetKind() == "CustomResourceDefinition",
			o.GetKind() == "ClusterRole" && o.GetName() == lockv1alpha1.UnlockRole,
			strings.HasPrefix(o.GetKind(), "ValidatingAdmissionPolicy") && o.GetName() == "lockguard-unlock":
			apply = append(apply, o)
		}
	}
	if len(apply) != 6 {
		t.Fatalf("rendered %v; want the Lock, LockException and ClusterLock CRDs, the ClusterRole lockguard-unlock, the unlock policy and its binding", framework.Kinds(apply))
	}
	install(ctx, t, c, apply)

	const ns, user = "unlock-policy", "lock-writer"
	if err := client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
		t.Fatal(err)
	}
	writer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "lock-writer"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{lockv1alpha1.Group}, Resources: []string{"locks"}, Verbs: []string{"get", "list", "update", "patch", "delete"}}}}
	binding := func(kind, role string) *rbacv1.RoleBinding {
		return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	}
	for _, o := range []client.Object{writer, binding("Role", writer.Name)} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	uc, err := client.New(cfg, client.Options{Scheme: c.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	lock := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": lockv1alpha1.GroupVersion.String(), "kind": "Lock",
		"metadata": map[string]any{"namespace": ns, "name": "freeze"},
		"spec":     map[string]any{"targetRef": map[string]any{"kind": "Stack", "name": "db"}, "level": string(lockv1alpha1.LevelReadOnly)},
	}}
	if err := c.Create(ctx, lock.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	lower := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"level":"CanNotDelete"}}`))

	wantDelete := "denied request: " + lockv1alpha1.UnlockDeleteMessage(ns, "freeze")
	// Policies are loaded asynchronously: wait until the dry-run delete is
	// refused.
	var last error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = uc.Delete(ctx, lock.DeepCopy(), client.DryRunAll)
		return last != nil && strings.HasSuffix(last.Error(), wantDelete), nil
	}); err != nil {
		t.Fatalf("the policy never refused a Lock's delete without unlock: last answer %v", last)
	}
	if err := uc.Delete(ctx, lock.DeepCopy()); !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), wantDelete) {
		t.Errorf("deleting a Lock without unlock: %v; want Forbidden ending with %q", err, wantDelete)
	}
	wantLower := "denied request: " + lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredLevel, ns, "freeze")
	if err := uc.Patch(ctx, lock.DeepCopy(), lower); !apierrors.IsForbidden(err) || !strings.HasSuffix(err.Error(), wantLower) {
		t.Errorf("lowering a Lock's level without unlock: %v; want Forbidden ending with %q", err, wantLower)
	}

	if err := c.Create(ctx, binding("ClusterRole", lockv1alpha1.UnlockRole)); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = uc.Patch(ctx, lock.DeepCopy(), lower)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("lowering a Lock's level with lockguard-unlock: last answer %v", last)
	}
	if err := uc.Delete(ctx, lock.DeepCopy()); err != nil {
		t.Errorf("deleting a Lock with lockguard-unlock: %v", err)
	}
}
