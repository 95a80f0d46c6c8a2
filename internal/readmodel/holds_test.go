package readmodel

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestHoldsLocksInAgrees: HoldsLocksIn is true exactly for the namespaces
// that hold a Lock, whatever its state (expired, in Audit, being
// deleted, an invalid selector), as Locks come and go; and wherever
// LocksCovering finds a Lock, live or standing, it is true: the webhook's
// lockReader.nothingIn answers from it in LocksCovering's place.
func TestHoldsLocksInAgrees(t *testing.T) {
	past := metav1.NewTime(time.Now().Add(-time.Hour))
	expired := newLock("expired", "a", "", "Stack", "s")
	expired.Spec.ExpiresAt = &past
	audit := newLock("audit", "a", "", "Stack", "s")
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	deleting := newLock("deleting", "a", "", "Stack", "s")
	deleting.Finalizers = []string{"example.com/keep"}
	deleting.DeletionTimestamp = &past
	invalid := newSelectorLock("invalid", "a", lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: "Bogus"}}})
	src := &lockSource{watcher: watch.NewFake(), locks: []lockv1alpha1.Lock{
		*newLock("forge", "a", "", "Stack", "s"),
		*newSelectorLock("selected", "a", lockv1alpha1.LockSelector{}),
		*expired, *audit, *deleting, *invalid,
	}}
	index := startIndex(t, src)
	objects := func(ns string) []lockv1alpha1.Object {
		var objs []lockv1alpha1.Object
		for _, labels := range []map[string]string{nil, {"tier": "db"}} {
			for _, name := range []string{"s", "other"} {
				objs = append(objs, lockv1alpha1.Object{Namespace: ns, Group: lockv1alpha1.Group, Kind: "Stack", Name: name, Labels: labels})
			}
		}
		return objs
	}
	check := func(when string, holding map[string]bool) {
		t.Helper()
		for _, ns := range []string{"forge", "selected", "expired", "audit", "deleting", "invalid", "empty"} {
			held, err := index.HoldsLocksIn(ns)
			if err != nil || held != holding[ns] {
				t.Errorf("%s: HoldsLocksIn(%s) = %v, %v; want %v", when, ns, held, err, holding[ns])
			}
			// Whatever LocksCovering finds (a live Lock, or a standing
			// one), HoldsLocksIn holds too.
			live, standing, err := index.LocksCovering(ns, objects(ns))
			if err != nil {
				t.Fatal(err)
			}
			found := standing
			for _, locks := range live {
				found = found || len(locks) > 0
			}
			if found && !held {
				t.Errorf("%s: LocksCovering(%s) finds Locks (standing %v, live %v) where HoldsLocksIn says none", when, ns, standing, live)
			}
		}
	}
	holding := map[string]bool{"forge": true, "selected": true, "expired": true, "audit": true, "deleting": true, "invalid": true}
	check("listed", holding)
	// A Lock added to an empty namespace, then deleted, as the watch says.
	added := newLock("empty", "b", "", "Stack", "s")
	added.ResourceVersion = "2"
	src.watcher.Add(added)
	holding["empty"] = true
	waitFor(t, "the added Lock", func() bool { held, _ := index.HoldsLocksIn("empty"); return held })
	check("added", holding)
	src.watcher.Delete(added)
	delete(holding, "empty")
	waitFor(t, "the deleted Lock", func() bool { held, _ := index.HoldsLocksIn("empty"); return !held })
	check("deleted", holding)
}
