package contract_test

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// TestGuardScale measures the namespace and CRD guards' decisions through
// the API server with LOCKGUARD_GUARD_SCALE Locks (each on its own Stack)
// in one namespace: dry-run deletes of the namespace and of the Stack CRD,
// each denied with a short message. Opt-in: it creates twice that many
// objects.
func TestGuardScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LOCKGUARD_GUARD_SCALE"))
	if n <= 0 {
		t.Skip("set LOCKGUARD_GUARD_SCALE=<number of Locks> to measure the guards at that scale")
	}
	ns := kube.NewNamespace(t, "guardscale")
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	work := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				name := fmt.Sprintf("s%05d", i)
				if err := kube.Client.Create(t.Context(), framework.Object(framework.StackGVK, ns, name)); err != nil {
					errs <- err
					continue
				}
				if err := kube.Client.Create(t.Context(), framework.NewLock(ns, "keep-"+name, "Stack", name, "scale")); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d Stacks and %d Locks created in %s", n, n, time.Since(start).Round(time.Millisecond))
	framework.Eventually(t, 2*time.Minute, "namespace labelled", namespaceLabelIs(ns, true))

	measure := func(what string, obj client.Object, wantPrefix string) {
		var took []time.Duration
		for range 5 {
			begin := time.Now()
			err := kube.Client.Delete(t.Context(), obj, client.DryRunAll)
			took = append(took, time.Since(begin))
			if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), wantPrefix) {
				t.Fatalf("dry-run delete of %s: %v; want it denied with %q", what, err, wantPrefix)
			}
			if len(err.Error()) > 4096 {
				t.Fatalf("dry-run delete of %s: a denial of %d bytes; want it short", what, len(err.Error()))
			}
		}
		slices.Sort(took)
		t.Logf("%s with %d Locks: dry-run delete denied in min %s, median %s, max %s (5 runs)", what, n,
			took[0].Round(time.Millisecond), took[2].Round(time.Millisecond), took[4].Round(time.Millisecond))
	}
	measure("namespace "+ns, namespace(ns), fmt.Sprintf("and %d more]; delete the Lock(s) before deleting this namespace", n-10))
	measure("CustomResourceDefinition stacks.core.navique.com", framework.CRD("stacks.core.navique.com"), "customresourcedefinition is protected by Lock(s) [")
}
