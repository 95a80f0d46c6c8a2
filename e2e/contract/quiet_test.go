package contract_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// quietWindow is how long TestQuietCluster watches lockguard's writes:
// longer than every periodic path of the reconciler in this suite (the
// recheck of unserved and misspelled kinds, 10s; discovery, 2s).
const quietWindow = 15 * time.Second

// TestQuietCluster: with a steady mix of valid, misspelled, missing and
// invalid Locks in several namespaces, and selector Locks (tier=db and
// {}) that count what they cover and have refused a delete (their status
// carries protected and lastDenied), and a selector ClusterLock on a
// Namespace and a ClusterRole (whose kinds its reconciler watches, and
// passes over every 10 s), lockguard writes nothing at all
// (annotations, Lock and ClusterLock status, labels, Events) once they
// have settled. Its requests are counted in its own transport.
func TestQuietCluster(t *testing.T) {
	inProcess(t)
	ctx := t.Context()
	var namespaces []string
	for i := range 3 {
		ns := kube.NewNamespace(t, fmt.Sprintf("quiet%d", i))
		namespaces = append(namespaces, ns)
		kube.CreateLockMix(t, ns)
	}
	framework.Eventually(t, framework.DefaultTimeout, "every Lock's status written and true", func(ctx context.Context) error {
		return kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: namespaces})
	})
	watched := append(slices.Clone(namespaces), quietSelectorLocks(t), quietClusterLock(t))

	mine := func(r framework.Request) bool {
		return r.Write() && (r.InNamespaces(watched...) || !strings.Contains(r.Path, "/namespaces/"))
	}
	mark := settle(t, mine)
	framework.Consistently(t, quietWindow, "lockguard writes nothing in a steady cluster", func(context.Context) error {
		if w := suite.requests.Since(mark, mine); len(w) > 0 {
			return fmt.Errorf("%d writes:\n%s", len(w), framework.Summary(w))
		}
		return nil
	})
	all := suite.requests.Since(mark, func(framework.Request) bool { return true })
	t.Logf("lockguard's requests over the quiet %s: %d, none of them writes in the test's namespaces or cluster-scoped:\n%s", quietWindow, len(all), framework.Summary(all))
	if err := kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: namespaces}); err != nil {
		t.Errorf("docs/contract.md rule 13 after the quiet window:\n%v", err)
	}
}

// settle waits until lockguard has sent no request mine keeps (a write)
// for framework.SettleQuiet: the Events of the last status changes are
// sent asynchronously, and retried after 10s. It returns the mark of the
// requests from then on.
func settle(t *testing.T, mine func(framework.Request) bool) int {
	t.Helper()
	mark, lastWrite := suite.requests.Mark(), time.Now()
	framework.Eventually(t, framework.DefaultTimeout, "lockguard settles", func(context.Context) error {
		if w := suite.requests.Since(mark, mine); len(w) > 0 {
			mark, lastWrite = suite.requests.Mark(), time.Now()
			return fmt.Errorf("still writing:\n%s", framework.Summary(w))
		}
		if d := time.Since(lastWrite); d < framework.SettleQuiet {
			return fmt.Errorf("quiet for %s only", d)
		}
		return nil
	})
	return suite.requests.Mark()
}

// quietSelectorLocks creates a namespace with Stacks db (tier=db) and web,
// a tier=db and a {} selector Lock, and has a delete of Stack db refused,
// and returns the namespace once both Locks say what they cover and
// record the refusal.
func quietSelectorLocks(t *testing.T) string {
	t.Helper()
	ns := kube.NewNamespace(t, "quietsel")
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	createLabelledStack(t, ns, "web", nil)
	db := kube.CreateLock(t, framework.NewSelectorLock(ns, "tier-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}))
	all := kube.CreateLock(t, framework.NewSelectorLock(ns, "all", lockv1alpha1.LockSelector{}))
	kube.WaitActive(t, db, all)
	waitProtected(t, db, protected(1, "Stack", "db"))
	waitProtected(t, all, protected(2, "Stack", "db", "Stack", "web"))
	before := time.Now()
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "db"), all, db)
	user := whoAmI(t)
	for _, l := range []*lockv1alpha1.Lock{db, all} {
		waitLastDenied(t, l, lockv1alpha1.DeniedRequest{User: user, Operation: "DELETE", Kind: "Stack", Name: "db", Count: 1}, before, time.Now().Add(time.Second))
	}
	return ns
}

// quietClusterLock creates a Namespace and a ClusterRole labelled with a
// key of their own, and a selector ClusterLock on both kinds with it, and
// returns the Namespace once the ClusterLock is Active and counts both.
func quietClusterLock(t *testing.T) string {
	t.Helper()
	ctx := t.Context()
	admin := withCRDs(t)
	key := "quiet-clk-" + rand.String(5)
	labels := map[string]string{key: "on"}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: labels}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: labels}}
	cl := selectorClusterLock(key, key, "on", "Namespace", "ClusterRole")
	for _, o := range []client.Object{ns, role, cl} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range []client.Object{cl, role, ns} {
			_ = admin.Delete(context.Background(), o)
		}
	})
	kube.WaitClusterLock(t, cl.Name, lockv1alpha1.ReasonActive, "")
	framework.Eventually(t, framework.DefaultTimeout, "ClusterLock "+cl.Name+" counts its 2 objects", func(ctx context.Context) error {
		var got lockv1alpha1.ClusterLock
		if err := admin.Get(ctx, client.ObjectKeyFromObject(cl), &got); err != nil {
			return err
		}
		if p := got.Status.Protected; p == nil || p.Count != 2 {
			return fmt.Errorf("status.protected %+v; want 2 objects", p)
		}
		return nil
	})
	return ns.Name
}
