package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// TestKubectlGetLocks checks the printer columns, for a targetRef Lock, a
// ReadOnly selector Lock and an expiring Lock of the whole namespace: the
// scope (status.scope: Stack/forge, selector:tier=db, <all>), the level,
// whether a ReadOnly Lock's freeze is in force (its ReadOnly condition's
// reason; empty for CanNotDelete), the Ready reason, the expiry (empty
// for a Lock that never expires) and age; and in -o wide, active, the
// enforcement (Enforce, the API server's default), the protected count,
// the last denial (empty: none) and the reason.
func TestKubectlGetLocks(t *testing.T) {
	ns := kube.NewNamespace(t, "printer")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	db := framework.Object(framework.StackGVK, ns, "db")
	db.SetLabels(map[string]string{"tier": "db"})
	if err := kube.Client.Create(t.Context(), db); err != nil {
		t.Fatal(err)
	}
	lock := kube.CreateLock(t, framework.NewLock(ns, "protect-forge-stack", "Stack", "forge", "prod"))
	freeze := framework.NewSelectorLock(ns, "freeze-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}})
	freeze.Spec.Level = lockv1alpha1.LevelReadOnly
	kube.CreateLock(t, freeze)
	all := framework.NewSelectorLock(ns, "all", lockv1alpha1.LockSelector{})
	expires := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
	all.Spec.ExpiresAt = &expires
	kube.CreateLock(t, all)
	kube.WaitActive(t, lock)

	header := []string{"NAME", "SCOPE", "LEVEL", "READ-ONLY", "READY", "EXPIRES", "AGE", "ACTIVE", "ENFORCEMENT", "PROTECTED", "LAST DENIED", "REASON"}
	want := map[string][]string{
		"all":                 {"<all>", "CanNotDelete", "", "Active", expires.UTC().Format(time.RFC3339), "true", "Enforce", "2", "", ""},
		"freeze-db":           {"selector:tier=db", "ReadOnly", "InForce", "Active", "", "true", "Enforce", "1", "", ""},
		"protect-forge-stack": {"Stack/forge", "CanNotDelete", "", "Active", "", "true", "Enforce", "1", "", "prod"},
	}
	framework.Eventually(t, framework.DefaultTimeout, "kubectl get locks -o wide", func(context.Context) error {
		r := kube.Kubectl(t, "", "get", "locks", "-n", ns, "-o", "wide", "--no-headers=false")
		if r.Code != 0 {
			return fmt.Errorf("kubectl get locks: exit %d: %s", r.Code, r.Stderr)
		}
		rows, err := tableCells(r.Stdout, header)
		if err != nil {
			return err
		}
		got := map[string][]string{}
		for _, row := range rows {
			// The age (row[6]) is left out: it depends on the clock.
			got[row[0]] = append(append([]string{}, row[1:6]...), row[7:]...)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			return fmt.Errorf("rows (without age) -want, +got:\n%s", diff)
		}
		return nil
	})
	r := kube.Kubectl(t, "", "get", "locks", "-n", ns)
	if _, err := tableCells(r.Stdout, header[:7]); r.Code != 0 || err != nil {
		t.Errorf("kubectl get locks: exit %d, %v:\n%s", r.Code, err, r.Stdout)
	}
}

// tableCells cuts kubectl's table out into cells at the columns of its
// header, which must be exactly header (an empty cell is ""), one row a
// line without the header.
func tableCells(out string, header []string) ([][]string, error) {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	starts := make([]int, len(header))
	at := 0
	for i, h := range header {
		j := strings.Index(lines[0][at:], h)
		if j < 0 || (i > 0 && strings.TrimSpace(lines[0][starts[i-1]:at+j]) != header[i-1]) {
			return nil, fmt.Errorf("header %q, want the columns %q", lines[0], header)
		}
		starts[i], at = at+j, at+j+len(h)
	}
	if strings.TrimSpace(lines[0][starts[len(starts)-1]:]) != header[len(header)-1] {
		return nil, fmt.Errorf("header %q, want the columns %q", lines[0], header)
	}
	var rows [][]string
	for _, line := range lines[1:] {
		row := make([]string, len(header))
		for i, start := range starts {
			end := len(line)
			if i+1 < len(starts) {
				end = min(starts[i+1], len(line))
			}
			if start < len(line) {
				row[i] = strings.TrimSpace(line[start:end])
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// TestAnnotationByHand removes and edits the lock annotation by hand: the
// Stack stays protected, because the webhook reads Locks, and the
// reconciler puts the annotation back. (With no reconciler running: the
// e2e suite's Test11AnnotationWithoutReconciler.)
func TestAnnotationByHand(t *testing.T) {
	ns := kube.NewNamespace(t, "byhand")
	kube.CreateObject(t, framework.StackGVK, ns, "guarded")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-guarded", "Stack", "guarded", ""))
	kube.WaitActive(t, lock)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "guarded", "keep-guarded")

	t.Run("removed", func(t *testing.T) {
		kube.RemoveAnnotation(t, framework.StackGVK, ns, "guarded")
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "guarded"), lock)
		d := framework.Eventually(t, framework.DefaultTimeout, "annotation put back", kube.AnnotationIs(framework.StackGVK, ns, "guarded", "keep-guarded"))
		t.Logf("annotation put back %s after it was removed by hand", d.Round(10*time.Millisecond))
	})
	t.Run("edited", func(t *testing.T) {
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"someone-else"}}}`, lockv1alpha1.LockedAnnotation)
		if err := kube.Client.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "guarded"), client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "guarded"), lock)
		kube.WaitAnnotation(t, framework.StackGVK, ns, "guarded", "keep-guarded")
	})
	kube.WaitActive(t, lock)
	kube.MustExist(t, framework.StackGVK, ns, "guarded")
}

// TestStatusScopeUpgrade: a Lock whose status has no scope (as every Lock
// written by a lockguard without status.scope) gets it in one status
// write of lockguard's, then lockguard writes nothing more for it: the
// one write per Lock an upgrade costs, and no more.
func TestStatusScopeUpgrade(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "scopeup")
	kube.CreateObject(t, framework.StackGVK, ns, "forge")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep", "Stack", "forge", ""))
	kube.WaitLockStatus(t, lock, framework.ActiveStatus(lock))

	mine := func(r framework.Request) bool { return r.Write() && r.InNamespaces(ns) }
	// Settled first: the Event of the Lock's first status is sent
	// asynchronously.
	mark := settle(t, mine)
	// As an older lockguard left it: the status without scope.
	if err := kube.Client.Status().Patch(t.Context(), lock, client.RawPatch(types.MergePatchType, []byte(`{"status":{"scope":null}}`))); err != nil {
		t.Fatal(err)
	}
	kube.WaitLockStatus(t, lock, framework.ActiveStatus(lock)) // status.scope included
	framework.Consistently(t, 3*time.Second, "lockguard writes nothing more", func(context.Context) error {
		if w := suite.requests.Since(mark, mine); len(w) != 1 || w[0].Method != "PATCH" || !strings.HasSuffix(w[0].Path, "/locks/keep/status") {
			return fmt.Errorf("lockguard's writes in %s since the scope was removed: %d, want the one status PATCH of Lock keep:\n%s", ns, len(w), framework.Summary(w))
		}
		return nil
	})
}
