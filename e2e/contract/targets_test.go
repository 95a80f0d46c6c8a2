package contract_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestTargets covers Locks that protect nothing, or not yet: targets in
// another group, a Lock of a Lock, a cluster-scoped kind, a target that
// does not exist yet (and then does), and a target in another namespace.
// (A kind no CRD serves yet: TestKindInstalledAfterStart.)
func TestTargets(t *testing.T) {
	t.Run("other group", func(t *testing.T) {
		ns := kube.NewNamespace(t, "othergroup")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
		if err := kube.Client.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		lock := framework.NewLock(ns, "keep-settings", "ConfigMap", "settings", "")
		lock.Spec.TargetRef.APIVersion = "v1"
		kube.CreateLock(t, lock)
		kube.WaitLockStatus(t, lock, framework.InvalidStatus(`only core.navique.com resources can be locked, and targetRef.apiVersion "v1" is in group ""; `+lockv1alpha1.OptInHint(schema.GroupKind{Kind: "ConfigMap"})))
		if err := kube.Client.Delete(t.Context(), cm); err != nil {
			t.Fatalf("deleting the ConfigMap an invalid Lock names: %v", err)
		}
	})

	t.Run("lock of a lock", func(t *testing.T) {
		ns := kube.NewNamespace(t, "lockoflock")
		inner := kube.CreateLock(t, framework.NewLock(ns, "inner", "Stack", "nothing", ""))
		outer := kube.CreateLock(t, framework.NewLock(ns, "outer", "Lock", "inner", "locks cannot be locked"))
		kube.WaitLockStatus(t, outer, framework.InvalidStatus("a Lock cannot protect another Lock: deleting a Lock is never blocked"))
		kube.WaitLockStatus(t, inner, framework.MissingStatus(inner))
		kube.DeleteLock(t, inner)
	})

	t.Run("cluster-scoped kind", func(t *testing.T) {
		ns := kube.NewNamespace(t, "clusterscoped")
		region := framework.Object(framework.RegionGVK, "", "e2e-region-"+rand.String(5))
		if err := kube.Client.Create(t.Context(), region); err != nil {
			t.Fatal(err)
		}
		lock := kube.CreateLock(t, framework.NewLock(ns, "keep-region", "Region", region.GetName(), ""))
		kube.WaitLockStatus(t, lock, framework.InvalidStatus("Region.core.navique.com is cluster-scoped; a Lock protects resources in its own namespace"))
		if err := kube.Client.Delete(t.Context(), region); err != nil {
			t.Fatalf("deleting the Region an invalid Lock names: %v", err)
		}
	})

	t.Run("missing reference becomes active", func(t *testing.T) {
		ns := kube.NewNamespace(t, "missing")
		lock := kube.CreateLock(t, framework.NewLock(ns, "early", "Stack", "later", "created before its target"))
		kube.WaitLockStatus(t, lock, framework.MissingStatus(lock))
		kube.CreateObject(t, framework.StackGVK, ns, "later")
		kube.WaitActive(t, lock)
		kube.WaitAnnotation(t, framework.StackGVK, ns, "later", "early")
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "later"), lock)
	})

	t.Run("other namespace", func(t *testing.T) {
		lockNS := kube.NewNamespace(t, "lockhere")
		targetNS := kube.NewNamespace(t, "targetthere")
		kube.CreateObject(t, framework.StackGVK, targetNS, "shared")
		lock := kube.CreateLock(t, framework.NewLock(lockNS, "elsewhere", "Stack", "shared", ""))
		kube.WaitLockStatus(t, lock, framework.MissingStatus(lock))
		if err := kube.AnnotationIs(framework.StackGVK, targetNS, "shared", "")(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := kube.DeleteObject(t.Context(), framework.StackGVK, targetNS, "shared"); err != nil {
			t.Fatalf("deleting a Stack that only a Lock in another namespace names: %v", err)
		}
	})
}

// TestOnlyDeletesAreBlocked changes a locked Stack in every way but
// deleting it (update, merge patch, JSON patch, server-side apply, status),
// and creates, updates and deletes Locks: none of it is blocked.
func TestOnlyDeletesAreBlocked(t *testing.T) {
	ns := kube.NewNamespace(t, "updates")
	kube.CreateObject(t, framework.StackGVK, ns, "web")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-web", "Stack", "web", "first reason"))
	kube.WaitActive(t, lock)

	u := kube.MustExist(t, framework.StackGVK, ns, "web")
	if err := unstructured.SetNestedField(u.Object, "large", "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := kube.Client.Update(t.Context(), u); err != nil {
		t.Fatalf("update of a locked Stack: %v", err)
	}
	patches := []struct {
		name  string
		patch client.Patch
		opts  []client.PatchOption
	}{
		{"merge patch", client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":3}}`)), nil},
		{"JSON patch", client.RawPatch(types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/labels","value":{"tier":"frontend"}}]`)), nil},
		{"server-side apply", client.RawPatch(types.ApplyPatchType, []byte(`{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","spec":{"owner":"team-a"}}`)),
			[]client.PatchOption{client.FieldOwner("e2e"), client.ForceOwnership}},
	}
	for _, p := range patches {
		if err := kube.Client.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "web"), p.patch, p.opts...); err != nil {
			t.Fatalf("%s of a locked Stack: %v", p.name, err)
		}
	}
	if err := kube.Client.Status().Patch(t.Context(), framework.Object(framework.StackGVK, ns, "web"), client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Ready"}}`))); err != nil {
		t.Fatalf("status patch of a locked Stack: %v", err)
	}
	u = kube.MustExist(t, framework.StackGVK, ns, "web")
	for path, want := range map[string]any{"spec.size": "large", "spec.replicas": int64(3), "spec.owner": "team-a", "status.phase": "Ready", "metadata.labels.tier": "frontend"} {
		got, _, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(path, ".")...)
		if got != want {
			t.Errorf("after the updates, %s = %v, want %v", path, got, want)
		}
	}
	kube.WaitAnnotation(t, framework.StackGVK, ns, "web", "keep-web")

	// Updating a Lock's reason is not blocked, and shows in the status and
	// the denial message.
	framework.Eventually(t, framework.DefaultTimeout, "update the Lock's reason", func(ctx context.Context) error {
		var l lockv1alpha1.Lock
		if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(lock), &l); err != nil {
			return err
		}
		l.Spec.Reason = "second reason"
		return kube.Client.Update(ctx, &l)
	})
	lock.Spec.Reason = "second reason"
	kube.WaitActive(t, lock)
	kube.WaitDenied(t, framework.StackGVK, ns, "web", lock)

	// The API server defaults targetRef.apiVersion, keeps targetRef
	// immutable, and refuses malformed Locks.
	var l lockv1alpha1.Lock
	if err := kube.Client.Get(t.Context(), client.ObjectKeyFromObject(lock), &l); err != nil {
		t.Fatal(err)
	}
	if got := l.Spec.TargetRef.APIVersion; got != lockv1alpha1.DefaultTargetAPIVersion {
		t.Errorf("defaulted targetRef.apiVersion = %q, want %q", got, lockv1alpha1.DefaultTargetAPIVersion)
	}
	err := kube.Client.Patch(t.Context(), &l, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"targetRef":{"name":"other"}}}`)))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "targetRef is immutable: delete this Lock and create a new one to protect another resource") {
		t.Errorf("changing targetRef: got %v, want Invalid with the immutability message", err)
	}
	for name, spec := range map[string]lockv1alpha1.LockSpec{
		"empty-kind":  {TargetRef: lockv1alpha1.TargetReference{Name: "x"}},
		"empty-name":  {TargetRef: lockv1alpha1.TargetReference{Kind: "Stack"}},
		"long-reason": {TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "x"}, Reason: strings.Repeat("r", 1025)},
	} {
		bad := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
		if err := kube.Client.Create(t.Context(), bad); !apierrors.IsInvalid(err) {
			t.Errorf("creating Lock %s: got %v, want Invalid", name, err)
		}
	}

	another := kube.CreateLock(t, framework.NewLock(ns, "keep-web-too", "Stack", "web", ""))
	kube.WaitAnnotation(t, framework.StackGVK, ns, "web", "keep-web,keep-web-too")
	kube.DeleteLock(t, another)
	kube.DeleteLock(t, lock)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "web", "")
	kube.DeleteOnceUnlocked(t, framework.StackGVK, ns, "web")
}
