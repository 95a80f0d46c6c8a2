//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// Test01SeedExample is the contract's seed example, through kubectl: the
// delete of a locked Stack fails with exit code 1, Forbidden and the exact
// message; once the Lock is deleted, so can the Stack be.
func Test01SeedExample(t *testing.T) {
	ns := newNamespace(t, "forge")
	const reason = "Production environment - remove this Lock deliberately before deleting."
	manifests := fmt.Sprintf(`apiVersion: core.navique.com/v1alpha1
kind: Stack
metadata:
  name: forge
  namespace: %[1]s
spec:
  environment: production
---
apiVersion: core.navique.com/v1alpha1
kind: Lock
metadata:
  name: protect-forge-stack
  namespace: %[1]s
spec:
  targetRef:
    apiVersion: core.navique.com/v1alpha1   # optional, this is the default
    kind: Stack
    name: forge
  reason: "%[2]s"
`, ns, reason)
	if r := kubectl(t, manifests, "apply", "-f", "-"); r.code != 0 {
		t.Fatalf("kubectl apply: exit %d: %s", r.code, r.stderr)
	}
	lock := framework.NewLock(ns, "protect-forge-stack", "Stack", "forge", reason)
	lock.Spec.TargetRef.APIVersion = lockv1alpha1.DefaultTargetAPIVersion
	waitActive(t, lock)
	waitAnnotation(t, stackGVK, ns, "forge", "protect-forge-stack")

	r := kubectl(t, "", "delete", "stack", "forge", "-n", ns)
	// The contract's message, written out rather than computed.
	const want = `Error from server (Forbidden): admission webhook "delete.lockguard.core.navique.com" denied the request: ` +
		`resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource ` +
		`(protect-forge-stack: Production environment - remove this Lock deliberately before deleting.)` + "\n"
	if r.code != 1 || r.stdout != "" || r.stderr != want {
		t.Fatalf("kubectl delete stack forge: got exit %d, stdout %q, stderr\n  %q\nwant exit 1, no stdout, stderr\n  %q", r.code, r.stdout, r.stderr, want)
	}
	mustExist(t, stackGVK, ns, "forge")

	if r := kubectl(t, "", "delete", "lock", "protect-forge-stack", "-n", ns); r.code != 0 || r.stdout != "lock.core.navique.com \"protect-forge-stack\" deleted\n" {
		t.Fatalf("kubectl delete lock: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	waitAnnotation(t, stackGVK, ns, "forge", "")
	if r := kubectl(t, "", "delete", "stack", "forge", "-n", ns); r.code != 0 || r.stdout != "stack.core.navique.com \"forge\" deleted\n" || r.stderr != "" {
		t.Fatalf("kubectl delete stack forge after the Lock was deleted: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	eventually(t, defaultTimeout, "Stack forge gone", gone(stackGVK, ns, "forge"))
}

// servedVersions returns the served versions of a sample kind's CRD.
func servedVersions(t *testing.T, plural string) []string {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := s.c.Get(t.Context(), client.ObjectKey{Name: plural + "." + lockv1alpha1.Group}, crd); err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var served []string
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if m["served"] == true {
			served = append(served, m["name"].(string))
		}
	}
	return served
}

// Test02EveryServedVersion deletes a locked object through every served
// version of its CRD, by name and as a collection: every request gets the
// same denial. The Lock names a different version than the one stored.
func Test02EveryServedVersion(t *testing.T) {
	ns := newNamespace(t, "versions")
	for _, tc := range []struct{ kind, plural string }{{"Stack", "stacks"}, {"PostgresCluster", "postgresclusters"}} {
		t.Run(tc.kind, func(t *testing.T) {
			versions := servedVersions(t, tc.plural)
			if len(versions) < 2 {
				t.Fatalf("%s serves versions %v; the test needs at least two", tc.plural, versions)
			}
			gvkOf := func(v string) schema.GroupVersionKind {
				return schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: v, Kind: tc.kind}
			}
			createTarget(t, gvkOf(versions[0]), ns, "db")
			lock := framework.NewLock(ns, "keep-"+tc.plural, tc.kind, "db", "versioned")
			lock.Spec.TargetRef.APIVersion = lockv1alpha1.Group + "/" + versions[len(versions)-1]
			createLock(t, lock)
			waitActive(t, lock)
			for _, v := range versions {
				wantDenied(t, deleteTarget(t.Context(), gvkOf(v), ns, "db"), lock)
				wantDenied(t, s.c.DeleteAllOf(t.Context(), newTarget(gvkOf(v), ns, ""), client.InNamespace(ns)), lock)
				wantDenied(t, deleteTarget(t.Context(), gvkOf(v), ns, "db", client.DryRunAll), lock)
			}
			mustExist(t, gvkOf(versions[0]), ns, "db")

			deleteLock(t, lock)
			waitAnnotation(t, gvkOf(versions[0]), ns, "db", "")
			deleteOnceUnlocked(t, gvkOf(versions[len(versions)-1]), ns, "db")
			eventually(t, defaultTimeout, tc.kind+" db gone", gone(gvkOf(versions[0]), ns, "db"))
		})
	}
}

// Test03LocksStack puts two Locks on one Stack and removes them one by one:
// the Stack stays protected, by the remaining Lock, until the last is gone,
// and the annotation lists exactly the Locks left at each step.
func Test03LocksStack(t *testing.T) {
	ns := newNamespace(t, "stacked")
	createTarget(t, stackGVK, ns, "db")
	first := createLock(t, framework.NewLock(ns, "a-first", "Stack", "db", "quarter close"))
	second := createLock(t, framework.NewLock(ns, "b-second", "Stack", "db", ""))
	waitActive(t, first, second)
	waitAnnotation(t, stackGVK, ns, "db", "a-first,b-second")
	wantDenied(t, deleteTarget(t.Context(), stackGVK, ns, "db"), first, second)
	if got, want := denialMessage(first, second), "resource is protected by Lock(s) [a-first b-second]; delete the Lock(s) before deleting this resource (a-first: quarter close)"; got != want {
		t.Fatalf("denial message %q, want %q", got, want)
	}

	deleteLock(t, first)
	waitAnnotation(t, stackGVK, ns, "db", "b-second")
	waitDenied(t, stackGVK, ns, "db", second)
	waitActive(t, second)

	deleteLock(t, second)
	waitAnnotation(t, stackGVK, ns, "db", "")
	deleteOnceUnlocked(t, stackGVK, ns, "db")
	eventually(t, defaultTimeout, "Stack db gone", gone(stackGVK, ns, "db"))
}

// Test04ServerSideDryRun checks that a server-side dry-run delete gets the
// real delete's answer and changes nothing.
func Test04ServerSideDryRun(t *testing.T) {
	ns := newNamespace(t, "dryrun")
	createTarget(t, stackGVK, ns, "prod")
	createTarget(t, stackGVK, ns, "scratch")
	lock := createLock(t, framework.NewLock(ns, "keep-prod", "Stack", "prod", "dry-run must not lie"))
	waitActive(t, lock)
	prod := mustExist(t, stackGVK, ns, "prod")
	scratch := mustExist(t, stackGVK, ns, "scratch")

	r := kubectl(t, "", "delete", "stack", "prod", "-n", ns, "--dry-run=server")
	if want := "Error from server (Forbidden): " + denialError(lock) + "\n"; r.code != 1 || r.stdout != "" || r.stderr != want {
		t.Fatalf("kubectl delete --dry-run=server of a locked Stack: got exit %d, stdout %q, stderr\n  %q\nwant exit 1, no stdout, stderr\n  %q", r.code, r.stdout, r.stderr, want)
	}
	wantDenied(t, s.c.DeleteAllOf(t.Context(), newTarget(stackGVK, ns, ""), client.InNamespace(ns), client.DryRunAll), lock)

	r = kubectl(t, "", "delete", "stack", "scratch", "-n", ns, "--dry-run=server")
	if want := "stack.core.navique.com \"scratch\" deleted (server dry run)\n"; r.code != 0 || r.stdout != want {
		t.Fatalf("kubectl delete --dry-run=server of an unlocked Stack: got exit %d, stdout %q, stderr %q; want exit 0, stdout %q", r.code, r.stdout, r.stderr, want)
	}

	for _, before := range []*unstructured.Unstructured{prod, scratch} {
		after := mustExist(t, stackGVK, ns, before.GetName())
		if after.GetResourceVersion() != before.GetResourceVersion() {
			t.Errorf("Stack %s changed during dry-run deletes: resourceVersion %s, was %s", before.GetName(), after.GetResourceVersion(), before.GetResourceVersion())
		}
	}
	waitAnnotation(t, stackGVK, ns, "prod", "keep-prod")
}

// stackNames returns the names of the Stacks in ns, sorted.
func stackNames(t *testing.T, ns string) []string {
	t.Helper()
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(stackGVK.GroupVersion().WithKind("StackList"))
	if err := s.c.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range list.Items {
		names = append(names, u.GetName())
	}
	slices.Sort(names)
	return names
}

// lines splits output into sorted lines.
func lines(out string) []string {
	ls := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	slices.Sort(ls)
	return ls
}

// Test05DeleteAll deletes every Stack of a namespace holding locked and
// unlocked Stacks, with `kubectl delete --all` (one DELETE per object) and
// with a deletecollection request (no name in the request, the object in
// oldObject): the unlocked Stacks go, the locked ones stay.
func Test05DeleteAll(t *testing.T) {
	setup := func(t *testing.T) (string, *lockv1alpha1.Lock, *lockv1alpha1.Lock) {
		ns := newNamespace(t, "all")
		for _, name := range []string{"locked-a", "locked-b", "free-1", "free-2"} {
			createTarget(t, stackGVK, ns, name)
		}
		a := createLock(t, framework.NewLock(ns, "lock-a", "Stack", "locked-a", "keep a"))
		b := createLock(t, framework.NewLock(ns, "lock-b", "Stack", "locked-b", ""))
		waitActive(t, a, b)
		return ns, a, b
	}
	check := func(t *testing.T, ns string) {
		t.Helper()
		if got, want := stackNames(t, ns), []string{"locked-a", "locked-b"}; !slices.Equal(got, want) {
			t.Fatalf("Stacks left: %v, want %v", got, want)
		}
		waitAnnotation(t, stackGVK, ns, "locked-a", "lock-a")
		waitAnnotation(t, stackGVK, ns, "locked-b", "lock-b")
	}

	t.Run("kubectl", func(t *testing.T) {
		ns, a, b := setup(t)
		r := kubectl(t, "", "delete", "stacks", "--all", "-n", ns)
		if r.code != 1 {
			t.Errorf("kubectl delete stacks --all: exit %d, want 1", r.code)
		}
		if got, want := lines(r.stdout), []string{`stack.core.navique.com "free-1" deleted`, `stack.core.navique.com "free-2" deleted`}; !slices.Equal(got, want) {
			t.Errorf("stdout lines:\n  got  %q\n  want %q", got, want)
		}
		if got, want := lines(r.stderr), []string{"Error from server (Forbidden): " + denialError(a), "Error from server (Forbidden): " + denialError(b)}; !slices.Equal(got, want) {
			t.Errorf("stderr lines:\n  got  %q\n  want %q", got, want)
		}
		check(t, ns)
	})

	t.Run("deletecollection", func(t *testing.T) {
		ns, a, b := setup(t)
		err := s.c.DeleteAllOf(t.Context(), newTarget(stackGVK, ns, ""), client.InNamespace(ns))
		if err == nil || !apierrors.IsForbidden(err) {
			t.Fatalf("deletecollection of stacks: got %v, want Forbidden", err)
		}
		// The API server deletes the items in parallel and returns one
		// of the denials.
		if got := err.Error(); got != denialError(a) && got != denialError(b) {
			t.Fatalf("deletecollection error:\n  got  %s\n  want %s\n  or   %s", got, denialError(a), denialError(b))
		}
		check(t, ns)
	})
}
