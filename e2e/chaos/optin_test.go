//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Opted-in PersistentVolumeClaims in the mix (docs/contract.md rule 21,
// docs/optin.md; issue 40).
//
// The run opts persistentvolumeclaims in (optInResources: lockguard's
// --protect-resource and the chart's protect.resources), and an opt-in
// worker works on PVCs alone, in a namespace of its own, with the same
// code and the same checker as the group's workers: it creates PVCs (in a
// selector two times in three), locks some by a targetRef Lock
// (apiVersion v1, kind PersistentVolumeClaim: one in ten apps/v1, which
// never protects) and some by a selector Lock (three in four name
// PersistentVolumeClaim in kinds; the others name no kind and so cover no
// PVC: a delete of a PVC they alone select must go through), deletes
// locked and unlocked PVCs (directly, as dry runs, and the moment a
// Lock's create is answered), and deletes Locks. Its deletes count in the
// PVC rows of the kind table; a PVC with a deletionTimestamp (held by
// kubernetes.io/pvc-protection, which kube-controller-manager lifts) is
// gone for the checker (observe).
//
// Not in its mix: deletecollection, owner cascades, updates under ReadOnly
// and break-glass exceptions (the group's workers cover them). The
// convergence check (convergence_test.go) covers its Locks, annotations
// and labels, but not rule 13's dry-run deletes
// (framework.CheckLockStatusTruth knows the group's kinds only).

// pvcGVK is the opted-in kind.
var pvcGVK = schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}

// optInResources are the resources the run opts in.
var optInResources = []schema.GroupResource{{Resource: "persistentvolumeclaims"}}

// pvcsPerClient is how many PVCs an opt-in worker works on.
const pvcsPerClient = 4

// warmUpLock names the Lock the run creates in an opt-in worker's
// namespace before the worker starts, unless LOCKGUARD_CHAOS_PVC_WARMUP=0.
//
// Why: an object that comes under a Lock after the Lock's create, in a
// namespace's first moments, still has a window (docs/optin.md, "An
// object that comes under a Lock after its create"): a Lock's create
// labels core.navique.com/protected only what it covers then (a
// targetRef Lock's target, a selector Lock's matches), and the API
// server's namespace cache can lag the has-locks label that the chart's
// protect entry selects on; the worker creates PVCs into its selectors
// at any time. The warm-up Lock (on a Stack that never exists: it
// protects nothing) puts the label on before the workload, so that the
// run judges the rest. Run with LOCKGUARD_CHAOS_PVC_WARMUP=0 to include
// that window.
const warmUpLock = "warm-up"

// warmUp reports whether the run creates the warm-up Lock.
func warmUp() bool { return os.Getenv("LOCKGUARD_CHAOS_PVC_WARMUP") != "0" }

// createWarmUpLock creates the warm-up Lock in ns.
func createWarmUpLock(ctx context.Context, c client.Client, ns string) error {
	return c.Create(ctx, &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: warmUpLock},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{Kind: stackGVK.Kind, Name: "warm-up-never-exists"},
			Reason: "chaos: labels the namespace has-locks before the PVC workload (see optin_test.go)"},
	})
}

// newOptInWorker returns a worker on pvcsPerClient PVCs in ns.
func newOptInWorker(ns string, id int, c client.Client, seed uint64, n *counts, report func(deleteKind, string), logf func(string, ...any)) *worker {
	w := &worker{id: id, ns: ns, c: c, rng: rand.New(rand.NewPCG(seed, uint64(id))), n: n, report: report, logf: logf, optIn: true}
	for i := range pvcsPerClient {
		w.targets = append(w.targets, &target{gvk: pvcGVK, name: fmt.Sprintf("pvc-%d", i), lastKind: kindNone})
	}
	return w
}

// stepOptIn is an opt-in worker's step.
func (w *worker) stepOptIn(ctx context.Context) {
	switch r := w.rng.Float64(); {
	case r < 0.12:
		w.ensureTargets(ctx)
	case r < 0.30:
		w.createLock(ctx)
	case r < 0.42:
		w.lockThenDelete(ctx)
	case r < 0.60:
		w.deleteLock(ctx)
	default:
		w.deleteTarget(ctx)
	}
}

// kindFor returns the row of the kind table that a request of kind
// counts in: the PVC rows for an opt-in worker.
func (w *worker) kindFor(kind deleteKind) deleteKind {
	if !w.optIn {
		return kind
	}
	switch kind {
	case kindDryRun:
		return kindPVCDryRun
	case kindRaced:
		return kindPVCRaced
	default:
		return kindPVCDelete
	}
}

// selectorKinds returns the kinds a selector Lock of the worker names for
// its objects to be covered: none for the group's kinds (all of them),
// PersistentVolumeClaim for an opt-in worker.
func (w *worker) selectorKinds() []string {
	if w.optIn {
		return []string{pvcGVK.Kind}
	}
	return nil
}

// optInAPIVersion returns the targetRef apiVersion of a Lock on t: v1 for
// a PVC, empty (the group's default) otherwise.
func optInAPIVersion(t *target) string {
	if t.gvk == pvcGVK {
		return pvcGVK.Version
	}
	return ""
}

// targetSpec returns the spec of a new t.
func targetSpec(t *target) map[string]any {
	if t.gvk == pvcGVK {
		return map[string]any{
			"accessModes": []any{"ReadWriteOnce"},
			"resources":   map[string]any{"requests": map[string]any{"storage": "1Mi"}},
		}
	}
	return map[string]any{"size": int64(1)}
}

// optInSummary is the summary's line on the opt-in worker.
func optInSummary(w *worker) string {
	warm := "no warm-up Lock (LOCKGUARD_CHAOS_PVC_WARMUP=0)"
	if warmUp() {
		warm = fmt.Sprintf("its namespace got the warm-up Lock %q before the workload (the first-selector-Lock window of docs/optin.md, optin_test.go)", warmUpLock)
	}
	return fmt.Sprintf("chaos: opted-in kinds (rule 21): %s in namespace %s, %d of them; %s; their deletes are the three PVC rows above, their Locks count with the others",
		optInResources[0].Resource, w.ns, pvcsPerClient, warm)
}
