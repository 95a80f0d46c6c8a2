package contract_test

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

// TestSeedExample is the contract's seed example, through kubectl: the
// delete of a locked Stack fails with exit code 1, Forbidden and the exact
// message; once the Lock is deleted, so can the Stack be.
func TestSeedExample(t *testing.T) {
	ns := kube.NewNamespace(t, "forge")
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
	if r := kube.Kubectl(t, manifests, "apply", "-f", "-"); r.Code != 0 {
		t.Fatalf("kubectl apply: exit %d: %s", r.Code, r.Stderr)
	}
	lock := framework.NewLock(ns, "protect-forge-stack", "Stack", "forge", reason)
	lock.Spec.TargetRef.APIVersion = lockv1alpha1.DefaultTargetAPIVersion
	kube.WaitActive(t, lock)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "forge", "protect-forge-stack")

	r := kube.Kubectl(t, "", "delete", "stack", "forge", "-n", ns)
	// The contract's message, written out rather than computed.
	const want = `Error from server (Forbidden): admission webhook "delete.lockguard.core.navique.com" denied the request: ` +
		`resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource ` +
		`(protect-forge-stack: Production environment - remove this Lock deliberately before deleting.)` + "\n"
	if r.Code != 1 || r.Stdout != "" || r.Stderr != want {
		t.Fatalf("kubectl delete stack forge: got exit %d, stdout %q, stderr\n  %q\nwant exit 1, no stdout, stderr\n  %q", r.Code, r.Stdout, r.Stderr, want)
	}
	kube.MustExist(t, framework.StackGVK, ns, "forge")

	if r := kube.Kubectl(t, "", "delete", "lock", "protect-forge-stack", "-n", ns); r.Code != 0 || r.Stdout != "lock.core.navique.com \"protect-forge-stack\" deleted\n" {
		t.Fatalf("kubectl delete lock: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	kube.WaitAnnotation(t, framework.StackGVK, ns, "forge", "")
	if r := kube.Kubectl(t, "", "delete", "stack", "forge", "-n", ns); r.Code != 0 || r.Stdout != "stack.core.navique.com \"forge\" deleted\n" || r.Stderr != "" {
		t.Fatalf("kubectl delete stack forge after the Lock was deleted: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
	framework.Eventually(t, framework.DefaultTimeout, "Stack forge gone", kube.Gone(framework.StackGVK, ns, "forge"))
}

// servedVersions returns the served versions of a sample kind's CRD.
func servedVersions(t *testing.T, plural string) []string {
	t.Helper()
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	if err := kube.Client.Get(t.Context(), client.ObjectKey{Name: plural + "." + lockv1alpha1.Group}, crd); err != nil {
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

// TestEveryServedVersion deletes a locked object through every served
// version of its CRD, by name and as a collection: every request gets the
// same denial. The Lock names a different version than the one stored.
func TestEveryServedVersion(t *testing.T) {
	ns := kube.NewNamespace(t, "versions")
	for _, tc := range []struct{ kind, plural string }{{"Stack", "stacks"}, {"PostgresCluster", "postgresclusters"}} {
		t.Run(tc.kind, func(t *testing.T) {
			versions := servedVersions(t, tc.plural)
			if len(versions) < 2 {
				t.Fatalf("%s serves versions %v; the test needs at least two", tc.plural, versions)
			}
			gvkOf := func(v string) schema.GroupVersionKind {
				return schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: v, Kind: tc.kind}
			}
			kube.CreateObject(t, gvkOf(versions[0]), ns, "db")
			lock := framework.NewLock(ns, "keep-"+tc.plural, tc.kind, "db", "versioned")
			lock.Spec.TargetRef.APIVersion = lockv1alpha1.Group + "/" + versions[len(versions)-1]
			kube.CreateLock(t, lock)
			kube.WaitActive(t, lock)
			for _, v := range versions {
				kube.WantDenied(t, kube.DeleteObject(t.Context(), gvkOf(v), ns, "db"), lock)
				kube.WantDenied(t, kube.Client.DeleteAllOf(t.Context(), framework.Object(gvkOf(v), ns, ""), client.InNamespace(ns)), lock)
				kube.WantDenied(t, kube.DeleteObject(t.Context(), gvkOf(v), ns, "db", client.DryRunAll), lock)
			}
			kube.MustExist(t, gvkOf(versions[0]), ns, "db")

			kube.DeleteLock(t, lock)
			kube.WaitAnnotation(t, gvkOf(versions[0]), ns, "db", "")
			kube.DeleteOnceUnlocked(t, gvkOf(versions[len(versions)-1]), ns, "db")
			framework.Eventually(t, framework.DefaultTimeout, tc.kind+" db gone", kube.Gone(gvkOf(versions[0]), ns, "db"))
		})
	}
}

// TestLocksStack puts two Locks on one Stack and removes them one by one:
// the Stack stays protected, by the remaining Lock, until the last is gone,
// and the annotation lists exactly the Locks left at each step.
func TestLocksStack(t *testing.T) {
	ns := kube.NewNamespace(t, "stacked")
	kube.CreateObject(t, framework.StackGVK, ns, "db")
	first := kube.CreateLock(t, framework.NewLock(ns, "a-first", "Stack", "db", "quarter close"))
	second := kube.CreateLock(t, framework.NewLock(ns, "b-second", "Stack", "db", "year end"))
	kube.WaitActive(t, first, second)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "db", "a-first,b-second")
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "db"), first, second)
	// The contract's messages, written out rather than computed.
	if got, want := framework.DenialMessage(first, second), "resource is protected by Lock(s) [a-first b-second]; delete the Lock(s) before deleting this resource (a-first: quarter close; b-second: year end)"; got != want {
		t.Fatalf("denial message %q, want %q", got, want)
	}

	kube.DeleteLock(t, first)
	// The annotation changes once lockguard's cache has seen the delete;
	// until then the denial may still name both Locks (never neither).
	kube.WaitAnnotation(t, framework.StackGVK, ns, "db", "b-second")
	kube.WaitDenied(t, framework.StackGVK, ns, "db", second)
	if got, want := framework.DenialMessage(second), "resource is protected by Lock(s) [b-second]; delete the Lock(s) before deleting this resource (b-second: year end)"; got != want {
		t.Fatalf("denial message %q, want %q", got, want)
	}
	kube.WaitActive(t, second)

	kube.DeleteLock(t, second)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "db", "")
	kube.DeleteOnceUnlocked(t, framework.StackGVK, ns, "db")
	framework.Eventually(t, framework.DefaultTimeout, "Stack db gone", kube.Gone(framework.StackGVK, ns, "db"))
}

// TestServerSideDryRun checks that a server-side dry-run delete gets the
// real delete's answer and changes nothing.
func TestServerSideDryRun(t *testing.T) {
	ns := kube.NewNamespace(t, "dryrun")
	kube.CreateObject(t, framework.StackGVK, ns, "prod")
	kube.CreateObject(t, framework.StackGVK, ns, "scratch")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-prod", "Stack", "prod", "dry-run must not lie"))
	kube.WaitActive(t, lock)
	prod := kube.MustExist(t, framework.StackGVK, ns, "prod")
	scratch := kube.MustExist(t, framework.StackGVK, ns, "scratch")

	r := kube.Kubectl(t, "", "delete", "stack", "prod", "-n", ns, "--dry-run=server")
	if want := "Error from server (Forbidden): " + kube.DenialError(lock) + "\n"; r.Code != 1 || r.Stdout != "" || r.Stderr != want {
		t.Fatalf("kubectl delete --dry-run=server of a locked Stack: got exit %d, stdout %q, stderr\n  %q\nwant exit 1, no stdout, stderr\n  %q", r.Code, r.Stdout, r.Stderr, want)
	}
	kube.WantDenied(t, kube.Client.DeleteAllOf(t.Context(), framework.Object(framework.StackGVK, ns, ""), client.InNamespace(ns), client.DryRunAll), lock)

	r = kube.Kubectl(t, "", "delete", "stack", "scratch", "-n", ns, "--dry-run=server")
	if want := "stack.core.navique.com \"scratch\" deleted (server dry run)\n"; r.Code != 0 || r.Stdout != want {
		t.Fatalf("kubectl delete --dry-run=server of an unlocked Stack: got exit %d, stdout %q, stderr %q; want exit 0, stdout %q", r.Code, r.Stdout, r.Stderr, want)
	}

	for _, before := range []*unstructured.Unstructured{prod, scratch} {
		after := kube.MustExist(t, framework.StackGVK, ns, before.GetName())
		if after.GetResourceVersion() != before.GetResourceVersion() {
			t.Errorf("Stack %s changed during dry-run deletes: resourceVersion %s, was %s", before.GetName(), after.GetResourceVersion(), before.GetResourceVersion())
		}
	}
	kube.WaitAnnotation(t, framework.StackGVK, ns, "prod", "keep-prod")
}

// stackNames returns the names of the Stacks in ns, sorted.
func stackNames(t *testing.T, ns string) []string {
	t.Helper()
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(framework.StackGVK.GroupVersion().WithKind("StackList"))
	if err := kube.Client.List(t.Context(), &list, client.InNamespace(ns)); err != nil {
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

// TestDeleteAll deletes every Stack of a namespace holding locked and
// unlocked Stacks, with `kubectl delete --all` (one DELETE per object) and
// with a deletecollection request (no name in the request, the object in
// oldObject): the unlocked Stacks go, the locked ones stay.
func TestDeleteAll(t *testing.T) {
	setup := func(t *testing.T) (string, *lockv1alpha1.Lock, *lockv1alpha1.Lock) {
		ns := kube.NewNamespace(t, "all")
		for _, name := range []string{"locked-a", "locked-b", "free-1", "free-2"} {
			kube.CreateObject(t, framework.StackGVK, ns, name)
		}
		a := kube.CreateLock(t, framework.NewLock(ns, "lock-a", "Stack", "locked-a", "keep a"))
		b := kube.CreateLock(t, framework.NewLock(ns, "lock-b", "Stack", "locked-b", ""))
		kube.WaitActive(t, a, b)
		return ns, a, b
	}
	check := func(t *testing.T, ns string) {
		t.Helper()
		if got, want := stackNames(t, ns), []string{"locked-a", "locked-b"}; !slices.Equal(got, want) {
			t.Fatalf("Stacks left: %v, want %v", got, want)
		}
		kube.WaitAnnotation(t, framework.StackGVK, ns, "locked-a", "lock-a")
		kube.WaitAnnotation(t, framework.StackGVK, ns, "locked-b", "lock-b")
	}

	t.Run("kubectl", func(t *testing.T) {
		ns, a, b := setup(t)
		r := kube.Kubectl(t, "", "delete", "stacks", "--all", "-n", ns)
		if r.Code != 1 {
			t.Errorf("kubectl delete stacks --all: exit %d, want 1", r.Code)
		}
		if got, want := lines(r.Stdout), []string{`stack.core.navique.com "free-1" deleted`, `stack.core.navique.com "free-2" deleted`}; !slices.Equal(got, want) {
			t.Errorf("stdout lines:\n  got  %q\n  want %q", got, want)
		}
		if got, want := lines(r.Stderr), []string{"Error from server (Forbidden): " + kube.DenialError(a), "Error from server (Forbidden): " + kube.DenialError(b)}; !slices.Equal(got, want) {
			t.Errorf("stderr lines:\n  got  %q\n  want %q", got, want)
		}
		check(t, ns)
	})

	t.Run("deletecollection", func(t *testing.T) {
		ns, a, b := setup(t)
		err := kube.Client.DeleteAllOf(t.Context(), framework.Object(framework.StackGVK, ns, ""), client.InNamespace(ns))
		if err == nil || !apierrors.IsForbidden(err) {
			t.Fatalf("deletecollection of stacks: got %v, want Forbidden", err)
		}
		// The API server deletes the items in parallel and returns one
		// of the denials.
		if got := err.Error(); got != kube.DenialError(a) && got != kube.DenialError(b) {
			t.Fatalf("deletecollection error:\n  got  %s\n  want %s\n  or   %s", got, kube.DenialError(a), kube.DenialError(b))
		}
		check(t, ns)
	})
}
