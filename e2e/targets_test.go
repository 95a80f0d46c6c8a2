//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// Test08Targets covers Locks that protect nothing, or not yet: targets in
// another group, a Lock of a Lock, a cluster-scoped kind, a target that
// does not exist yet (and then does), and a target in another namespace.
func Test08Targets(t *testing.T) {
	t.Run("other group", func(t *testing.T) {
		ns := newNamespace(t, "othergroup")
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
		if err := s.c.Create(t.Context(), cm); err != nil {
			t.Fatal(err)
		}
		lock := framework.NewLock(ns, "keep-settings", "ConfigMap", "settings", "")
		lock.Spec.TargetRef.APIVersion = "v1"
		createLock(t, lock)
		waitLockStatus(t, lock, invalidStatus(`only core.navique.com resources can be locked, and targetRef.apiVersion "v1" is in group ""`))
		if err := s.c.Delete(t.Context(), cm); err != nil {
			t.Fatalf("deleting the ConfigMap an invalid Lock names: %v", err)
		}
	})

	t.Run("lock of a lock", func(t *testing.T) {
		ns := newNamespace(t, "lockoflock")
		inner := createLock(t, framework.NewLock(ns, "inner", "Stack", "nothing", ""))
		outer := createLock(t, framework.NewLock(ns, "outer", "Lock", "inner", "locks cannot be locked"))
		waitLockStatus(t, outer, invalidStatus("a Lock cannot protect another Lock: deleting a Lock is never blocked"))
		waitLockStatus(t, inner, missingStatus(inner))
		deleteLock(t, inner)
	})

	t.Run("cluster-scoped kind", func(t *testing.T) {
		ns := newNamespace(t, "clusterscoped")
		region := newTarget(regionGVK, "", "e2e-region-"+rand.String(5))
		if err := s.c.Create(t.Context(), region); err != nil {
			t.Fatal(err)
		}
		lock := createLock(t, framework.NewLock(ns, "keep-region", "Region", region.GetName(), ""))
		waitLockStatus(t, lock, invalidStatus("Region.core.navique.com is cluster-scoped; a Lock protects resources in its own namespace"))
		if err := s.c.Delete(t.Context(), region); err != nil {
			t.Fatalf("deleting the Region an invalid Lock names: %v", err)
		}
	})

	t.Run("missing reference becomes active", func(t *testing.T) {
		ns := newNamespace(t, "missing")
		lock := createLock(t, framework.NewLock(ns, "early", "Stack", "later", "created before its target"))
		waitLockStatus(t, lock, missingStatus(lock))
		createTarget(t, stackGVK, ns, "later")
		waitActive(t, lock)
		waitAnnotation(t, stackGVK, ns, "later", "early")
		wantDenied(t, deleteTarget(t.Context(), stackGVK, ns, "later"), lock)
	})

	t.Run("kind not served", func(t *testing.T) {
		ns := newNamespace(t, "unserved")
		lock := createLock(t, framework.NewLock(ns, "keep-gateway", "Gateway", "edge", ""))
		waitLockStatus(t, lock, lockStatus{
			Status: metav1.ConditionFalse, Reason: lockv1alpha1.ReasonMissingReference,
			Message: `no kind Gateway.core.navique.com is served by the API server; the Lock becomes active when the kind is installed and Gateway "edge" exists`,
		})
	})

	t.Run("other namespace", func(t *testing.T) {
		lockNS := newNamespace(t, "lockhere")
		targetNS := newNamespace(t, "targetthere")
		createTarget(t, stackGVK, targetNS, "shared")
		lock := createLock(t, framework.NewLock(lockNS, "elsewhere", "Stack", "shared", ""))
		waitLockStatus(t, lock, missingStatus(lock))
		if err := annotationIs(stackGVK, targetNS, "shared", "")(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := deleteTarget(t.Context(), stackGVK, targetNS, "shared"); err != nil {
			t.Fatalf("deleting a Stack that only a Lock in another namespace names: %v", err)
		}
	})
}

// Test09OnlyDeletesAreBlocked changes a locked Stack in every way but
// deleting it (update, merge patch, JSON patch, server-side apply, status),
// and creates, updates and deletes Locks: none of it is blocked.
func Test09OnlyDeletesAreBlocked(t *testing.T) {
	ns := newNamespace(t, "updates")
	createTarget(t, stackGVK, ns, "web")
	lock := createLock(t, framework.NewLock(ns, "keep-web", "Stack", "web", "first reason"))
	waitActive(t, lock)

	u := mustExist(t, stackGVK, ns, "web")
	if err := unstructured.SetNestedField(u.Object, "large", "spec", "size"); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Update(t.Context(), u); err != nil {
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
		if err := s.c.Patch(t.Context(), newTarget(stackGVK, ns, "web"), p.patch, p.opts...); err != nil {
			t.Fatalf("%s of a locked Stack: %v", p.name, err)
		}
	}
	if err := s.c.Status().Patch(t.Context(), newTarget(stackGVK, ns, "web"), client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Ready"}}`))); err != nil {
		t.Fatalf("status patch of a locked Stack: %v", err)
	}
	u = mustExist(t, stackGVK, ns, "web")
	for path, want := range map[string]any{"spec.size": "large", "spec.replicas": int64(3), "spec.owner": "team-a", "status.phase": "Ready", "metadata.labels.tier": "frontend"} {
		got, _, _ := unstructured.NestedFieldNoCopy(u.Object, strings.Split(path, ".")...)
		if got != want {
			t.Errorf("after the updates, %s = %v, want %v", path, got, want)
		}
	}
	waitAnnotation(t, stackGVK, ns, "web", "keep-web")

	// Updating a Lock's reason is not blocked, and shows in the status and
	// the denial message.
	eventually(t, defaultTimeout, "update the Lock's reason", func(ctx context.Context) error {
		var l lockv1alpha1.Lock
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(lock), &l); err != nil {
			return err
		}
		l.Spec.Reason = "second reason"
		return s.c.Update(ctx, &l)
	})
	lock.Spec.Reason = "second reason"
	waitActive(t, lock)
	waitDenied(t, stackGVK, ns, "web", lock)

	another := createLock(t, framework.NewLock(ns, "keep-web-too", "Stack", "web", ""))
	waitAnnotation(t, stackGVK, ns, "web", "keep-web,keep-web-too")
	deleteLock(t, another)
	deleteLock(t, lock)
	waitAnnotation(t, stackGVK, ns, "web", "")
	deleteOnceUnlocked(t, stackGVK, ns, "web")
}
