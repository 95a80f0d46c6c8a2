package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

var stsGVK = appsv1.SchemeGroupVersion.WithKind("StatefulSet")

// newStatefulSet returns a StatefulSet of no replicas (the suite runs no
// StatefulSet controller) whose retention policy deletes its claims with
// it: the controller then makes the StatefulSet an owner of each claim.
func newStatefulSet(ns, name string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: name, Image: name}}},
			},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType,
				WhenScaled:  appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
			},
		},
	}
}

// ownedPVC returns a PVC owned by owner, of apiVersion and kind (a typed
// object read back has no TypeMeta), the reference set by hand as the
// StatefulSet controller sets it for a retention policy of WhenDeleted:
// Delete.
func ownedPVC(ns, name string, labels map[string]string, apiVersion, kind string, owner metav1.Object) *corev1.PersistentVolumeClaim {
	pvc := newPVC(ns, name, labels)
	pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}}
	return pvc
}

// TestOptInStatefulSetCascade (docs/contract.md rules 6 and 21, issue 40):
// with StatefulSets opted in beside PVCs, the cascade guard walks a
// StatefulSet's claims as it walks the group's owners. The background,
// foreground and default deletes of a StatefulSet owning a PVC that a
// targetRef Lock, or a selector Lock, covers are refused up front by the
// protect entry naming the Lock and the claim, and both stay; an orphan
// delete is allowed, with a warning naming the claim, which stays; once
// the Lock is deleted, the StatefulSet's delete goes through. A Stack
// owning the StatefulSet (a chain of two owners) is refused too. A chain
// through a kind lockguard does not see (a ConfigMap) is not walked: the
// Stack's delete is allowed up front (docs/optin.md, What is not covered).
// This suite runs no garbage collector: e2e Test06CascadeOptInStatefulSet
// has the collector's side.
func TestOptInStatefulSetCascade(t *testing.T) {
	ns := kube.NewNamespace(t, "optin-sts")
	ctx := t.Context()
	sets := map[string]*appsv1.StatefulSet{}
	for _, name := range []string{"db", "cache", "web"} {
		s := newStatefulSet(ns, name)
		if err := kube.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
		sets[name] = s
	}
	app := kube.CreateObject(t, framework.StackGVK, ns, "app")
	// db is also the Stack's: app → db → data-db-0.
	db := sets["db"]
	db.OwnerReferences = []metav1.OwnerReference{{APIVersion: app.GetAPIVersion(), Kind: app.GetKind(), Name: app.GetName(), UID: app.GetUID()}}
	if err := kube.Client.Update(ctx, db); err != nil {
		t.Fatal(err)
	}
	loose := kube.CreateObject(t, framework.StackGVK, ns, "loose")
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loose-cfg", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: loose.GetAPIVersion(), Kind: loose.GetKind(), Name: loose.GetName(), UID: loose.GetUID()}}}}
	if err := kube.Client.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	tier := map[string]string{"tier": "db"}
	for _, pvc := range []*corev1.PersistentVolumeClaim{
		ownedPVC(ns, "data-db-0", nil, "apps/v1", "StatefulSet", sets["db"]),
		ownedPVC(ns, "data-cache-0", tier, "apps/v1", "StatefulSet", sets["cache"]),
		ownedPVC(ns, "data-web-0", nil, "apps/v1", "StatefulSet", sets["web"]),
		ownedPVC(ns, "data-loose", tier, "v1", "ConfigMap", cfg),
	} {
		if err := kube.Client.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
	}
	keepData := kube.CreateLock(t, optInLock(ns, "keep-data", pvcGVK, "data-db-0"))
	keepDB := kube.CreateLock(t, framework.NewSelectorLock(ns, "keep-db", lockv1alpha1.LockSelector{
		MatchLabels: tier, Kinds: []string{"PersistentVolumeClaim"}}))
	t.Cleanup(func() { deleteLocksFirst(t, keepData, keepDB) })
	kube.WaitActive(t, keepData, keepDB)
	kube.WaitAnnotation(t, pvcGVK, ns, "data-cache-0", "keep-db")

	policies := map[string][]client.DeleteOption{
		"default":    nil,
		"Background": {client.PropagationPolicy(metav1.DeletePropagationBackground)},
		"Foreground": {client.PropagationPolicy(metav1.DeletePropagationForeground)},
	}
	for _, tc := range []struct {
		set, claim string
		lock       *lockv1alpha1.Lock
	}{{"db", "data-db-0", keepData}, {"cache", "data-cache-0", keepDB}} {
		t.Run(tc.lock.Name, func(t *testing.T) {
			want := framework.EntryCascadeDenialError(protectEntry, []*lockv1alpha1.Lock{tc.lock}, "PersistentVolumeClaim/"+tc.claim)
			kube.WaitCascadeDenied(t, stsGVK, ns, tc.set, want)
			for name, opts := range policies {
				framework.WantError(t, name+" delete of StatefulSet "+tc.set, kube.DeleteObject(ctx, stsGVK, ns, tc.set, opts...), want)
			}
			kube.MustExist(t, stsGVK, ns, tc.set)
			kube.MustExist(t, pvcGVK, ns, tc.claim)
		})
	}
	t.Run("chain", func(t *testing.T) {
		kube.WaitCascadeDenied(t, framework.StackGVK, ns, "app", kube.CascadeDenialError([]*lockv1alpha1.Lock{keepData}, "PersistentVolumeClaim/data-db-0"))
		// The walk follows ownerReferences through the kinds the owner
		// index holds: not through a ConfigMap, so the cascade from loose
		// is not seen, and the collector's delete of data-loose is the
		// one refused (docs/optin.md).
		if err := kube.DeleteObject(ctx, framework.StackGVK, ns, "loose", client.DryRunAll); err != nil {
			t.Errorf("dry-run delete of Stack loose (a chain through a ConfigMap): %v; want it allowed, the walk not seeing ConfigMaps", err)
		}
	})
	t.Run("unlocked", func(t *testing.T) {
		if err := kube.DeleteObject(ctx, stsGVK, ns, "web", client.DryRunAll); err != nil {
			t.Errorf("dry-run delete of StatefulSet web, whose claim no Lock covers: %v", err)
		}
	})
	t.Run("orphan", func(t *testing.T) {
		c, warnings := framework.WarningClient(t, restConfig(t))
		orphan := client.PropagationPolicy(metav1.DeletePropagationOrphan)
		if err := c.Delete(ctx, framework.Object(stsGVK, ns, "cache"), orphan); err != nil {
			t.Fatalf("orphan delete of StatefulSet cache: %v; want it allowed", err)
		}
		if got := strings.Join(warnings.All(), "\n"); !strings.Contains(got, "locked dependents that stay: PersistentVolumeClaim/data-cache-0") {
			t.Errorf("orphan delete of StatefulSet cache: warnings %q, want one naming PersistentVolumeClaim/data-cache-0", got)
		}
		// No collector here to finish the orphaning: the StatefulSet
		// waits in its orphan finalizer; the claim stays.
		kube.MustExist(t, pvcGVK, ns, "data-cache-0")
	})
	t.Run("unlocked by deleting the Lock", func(t *testing.T) {
		kube.DeleteLock(t, keepData)
		framework.Eventually(t, framework.DefaultTimeout, "the delete of StatefulSet db allowed", func(ctx context.Context) error {
			err := kube.DeleteObject(ctx, stsGVK, ns, "db", client.PropagationPolicy(metav1.DeletePropagationBackground))
			if err != nil {
				return fmt.Errorf("delete: %v", err)
			}
			return nil
		})
		framework.Eventually(t, framework.DefaultTimeout, "StatefulSet db gone", kube.Gone(stsGVK, ns, "db"))
	})
}
