package contract_test

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// gizmoGVK is the sample kind of another group that a CRD serves
// (e2e/testdata/crds/gizmos.yaml), opted in by the suite (optedIn).
var gizmoGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Gizmo"}

// TestOptInCRDGuard (docs/contract.md rules 12 and 21): the
// CustomResourceDefinition of an opted-in kind a CRD serves cannot be
// deleted while a live Lock covers one of its objects (a dry-run delete,
// then a real one, are refused by the CRD guard naming the Lock; the CRD
// and the object stay);
// once the Lock is gone its delete is allowed (a dry run: the suite keeps
// the kind).
func TestOptInCRDGuard(t *testing.T) {
	inProcess(t)
	const crd = "gizmos.example.com"
	ns := kube.NewNamespace(t, "optin-crd")
	kube.CreateObject(t, gizmoGVK, ns, "g1")
	lock := kube.CreateLock(t, optInLock(ns, "keep-g1", gizmoGVK, "g1"))
	t.Cleanup(func() { deleteLocksFirst(t, lock) })
	kube.WaitActive(t, lock)

	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), framework.CRD(crd), client.DryRunAll), webhook.GuardCRD, framework.CRDDenialMessage(lock))
	kube.MustExist(t, framework.CRDGVK, "", crd)
	kube.MustExist(t, gizmoGVK, ns, "g1")
	// For real: refused alike, nothing lost.
	kube.WantGuardDenied(t, kube.Client.Delete(t.Context(), framework.CRD(crd)), webhook.GuardCRD, framework.CRDDenialMessage(lock))
	kube.MustExist(t, framework.CRDGVK, "", crd)
	kube.MustExist(t, gizmoGVK, ns, "g1")

	deleteLocksFirst(t, lock)
	kube.DeleteOnceUnguarded(t, framework.CRD(crd), client.DryRunAll)
}
