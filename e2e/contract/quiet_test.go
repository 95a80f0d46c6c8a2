package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/navique/lockguard/e2e/framework"
)

// quietWindow is how long TestQuietCluster watches lockguard's writes:
// longer than every periodic path of the reconciler in this suite (the
// recheck of unserved and misspelled kinds, 10s; discovery, 2s).
const quietWindow = 15 * time.Second

// TestQuietCluster: with a steady mix of valid, misspelled, missing and
// invalid Locks in several namespaces, lockguard writes nothing at all
// (annotations, Lock status, namespace labels, Events) once they have
// settled. Its requests are counted in its own transport.
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

	mine := func(r framework.Request) bool {
		return r.Write() && (r.InNamespaces(namespaces...) || !strings.Contains(r.Path, "/namespaces/"))
	}
	// Settled: no write for framework.SettleQuiet (the Events of the last
	// status changes are sent asynchronously, and retried after 10s).
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
	mark = suite.requests.Mark()
	framework.Consistently(t, quietWindow, "lockguard writes nothing in a steady cluster", func(context.Context) error {
		if w := suite.requests.Since(mark, mine); len(w) > 0 {
			return fmt.Errorf("%d writes:\n%s", len(w), framework.Summary(w))
		}
		return nil
	})
	all := suite.requests.Since(mark, func(framework.Request) bool { return true })
	t.Logf("lockguard's requests over the quiet %s: %d, none of them writes in the test's namespaces or cluster-scoped:\n%s", quietWindow, len(all), framework.Summary(all))
	if err := kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: namespaces}); err != nil {
		t.Errorf("LOCK-SPEC rule 13 after the quiet window:\n%v", err)
	}
}
