//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// selfTest runs the workload while no webhook guards anything, in
// namespaces of its own, until the checker has seen every delete kind
// remove (or, dry run, be allowed to remove) a locked object: proof that
// it is blind to none. It fails the test otherwise, and returns the
// summary line. It leaves no namespace behind.
func selfTest(ctx context.Context, t *testing.T, admin client.Client, cfg *rest.Config, opts client.Options, seed uint64, clients int, logf func(string, ...any)) string {
	t.Helper()
	began := time.Now()
	var n counts
	var seenMu sync.Mutex
	seen := map[deleteKind]bool{}
	report := func(kind deleteKind, msg string) {
		seenMu.Lock()
		first := !seen[kind]
		seen[kind] = true
		seenMu.Unlock()
		if first {
			logf("self-test: the checker caught [%s]: %s", kind, msg)
		}
	}
	workCtx, stop := context.WithCancel(ctx)
	var working sync.WaitGroup
	var namespaces []string
	for i := range clients {
		w := newWorker(fmt.Sprintf("selftest-%d", i), i, admin, seed^0x5e1f, &n, report, logf)
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}); err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, w.ns)
		w.ensureTargets(ctx)
		working.Add(1)
		go func() {
			defer working.Done()
			w.run(workCtx)
		}()
	}
	opt := newOptInWorker("selftest-pvc", clients, admin, seed^0x5e1f, &n, report, logf)
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opt.ns}}); err != nil {
		t.Fatal(err)
	}
	namespaces = append(namespaces, opt.ns)
	opt.ensureTargets(ctx)
	cw := newClusterWorker("selftest-cl", admin, seed^0x5e1f, &n, report, logf)
	cw.ensure(ctx)
	for _, w := range []interface{ run(context.Context) }{opt, cw} {
		working.Add(1)
		go func() {
			defer working.Done()
			w.run(workCtx)
		}()
	}
	big, err := newBigWorker("selftest-big", cfg, opts, seed^0x5e1f, &n, report, logf, false)
	if err != nil {
		t.Fatal(err)
	}
	working.Add(1)
	go func() {
		defer working.Done()
		big.run(workCtx)
	}()
	blind := func() []string {
		var out []string
		for k := range numKinds {
			if !kinds[k].harmless && !kinds[k].update && n.byKind[k].violations.Load() == 0 {
				out = append(out, k.String())
			}
		}
		return out
	}
	for len(blind()) > 0 && time.Since(began) < selfTestWithin {
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	working.Wait()
	took := time.Since(began)
	if b := blind(); len(b) > 0 {
		t.Fatalf("self-test: without lockguard, the checker saw no violation of %v in %s: it is blind to them", b, selfTestWithin)
	}
	var caught []string
	for k := range numKinds {
		if kinds[k].harmless || kinds[k].update {
			continue // Nothing to catch.
		}
		caught = append(caught, fmt.Sprintf("%s %d", k, n.byKind[k].violations.Load()))
	}
	if v := n.byKind[kindNone].violations.Load(); v > 0 {
		caught = append(caught, fmt.Sprintf("%s %d", kindNone, v))
	}
	logf("self-test: every delete kind caught in %s; deleting its namespaces and CRDs", took.Round(100*time.Millisecond))
	namespaces = append(namespaces, big.namespaces()...)
	namespaces = append(namespaces, cw.cleanup(ctx)...)
	crds := []string{crdName(widgetGVK), crdName(gadgetGVK)}
	for _, crd := range crds {
		if err := admin.Delete(ctx, framework.CRD(crd)); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, crd := range crds {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			err := admin.Get(ctx, client.ObjectKey{Name: crd}, framework.CRD(crd))
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("self-test: CRD %s still there 2m after its delete (last error %v)", crd, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	for _, ns := range namespaces {
		if err := admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	for _, ns := range namespaces {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			err := admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("self-test: namespace %s still there 2m after its delete (last error %v)", ns, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	logf("self-test: namespaces gone after %s in all", time.Since(began).Round(100*time.Millisecond))
	return fmt.Sprintf("chaos: checker self-test, before lockguard is installed: every delete kind caught deleting a locked object within %s (violations seen: %s; an Orphan owner delete deletes no locked object even without lockguard; the update kinds are not self-tested: without lockguard no ReadOnly Lock is ever in force)",
		took.Round(100*time.Millisecond), strings.Join(caught, ", "))
}
