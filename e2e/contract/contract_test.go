package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

const seedReason = "Production environment - remove this Lock deliberately before deleting."

// TestSeedExample is the contract's example through kubectl itself: the
// delete is Forbidden with the exact message, until the Lock is deleted.
func TestSeedExample(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")
	createLock(t, framework.NewLock(ns, "protect-forge-stack", "Stack", "forge", seedReason))
	waitAnnotation(t, stackV1alpha1, ns, "forge", "protect-forge-stack")

	_, stderr, err := kubectl("delete", "stack", "forge", "-n", ns)
	if code := exitCode(err); code != 1 {
		t.Fatalf("kubectl delete: exit code %d, want 1 (stderr %q)", code, stderr)
	}
	want := `Error from server (Forbidden): admission webhook "delete.lockguard.core.navique.com" denied the request: ` +
		`resource is protected by Lock(s) [protect-forge-stack]; delete the Lock(s) before deleting this resource (protect-forge-stack: ` + seedReason + `)`
	if got := trim(stderr); got != want {
		t.Fatalf("kubectl delete stderr:\n  %s\nwant\n  %s", got, want)
	}

	// The Stack is still there; remove the Lock and the delete goes through.
	if _, _, err := annotation(stackV1alpha1, ns, "forge"); err != nil {
		t.Fatalf("the Stack is gone after a denied delete: %v", err)
	}
	if _, stderr, err := kubectl("delete", "lock", "protect-forge-stack", "-n", ns); err != nil {
		t.Fatalf("kubectl delete lock: %v: %s", err, stderr)
	}
	if stdout, stderr, err := kubectl("delete", "stack", "forge", "-n", ns); err != nil {
		t.Fatalf("kubectl delete stack after the Lock is gone: %v: %s", err, stderr)
	} else if want := `stack.core.navique.com "forge" deleted`; !strings.Contains(stdout, want) {
		t.Fatalf("kubectl delete stack: stdout %q, want %q", stdout, want)
	}
}

// TestKubectlGetLocks checks the printer columns: target kind and name,
// active, ready reason and age, and the reason in -o wide.
func TestKubectlGetLocks(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")
	createLock(t, framework.NewLock(ns, "protect-forge-stack", "Stack", "forge", "prod"))
	waitLockState(t, ns, "protect-forge-stack", active)

	out, stderr, err := kubectl("get", "locks", "-n", ns, "-o", "wide", "--no-headers=false")
	if err != nil {
		t.Fatalf("kubectl get locks: %v: %s", err, stderr)
	}
	lines := strings.Split(trim(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("kubectl get locks -o wide: got %q", out)
	}
	if got, want := strings.Fields(lines[0]), []string{"NAME", "TARGET", "KIND", "TARGET", "ACTIVE", "READY", "AGE", "REASON"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("headers: got %q, want %q", got, want)
	}
	f := strings.Fields(lines[1])
	if len(f) != 7 || f[0] != "protect-forge-stack" || f[1] != "Stack" || f[2] != "forge" || f[3] != "true" || f[4] != "Active" || f[6] != "prod" {
		t.Errorf("row: got %q, want protect-forge-stack Stack forge true Active <age> prod", f)
	}
}

// TestVersionAgnostic deletes through both served versions of the Stack
// kind, and a Lock that names v1beta1 protects deletes through v1alpha1.
func TestVersionAgnostic(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")
	l := framework.NewLock(ns, "by-beta", "Stack", "forge", "")
	l.Spec.TargetRef.APIVersion = "core.navique.com/v1beta1"
	createLock(t, l)
	waitLockState(t, ns, "by-beta", active)

	msg := "resource is protected by Lock(s) [by-beta]; delete the Lock(s) before deleting this resource"
	wantDenied(t, deleteErr(stackV1alpha1, ns, "forge"), msg)
	wantDenied(t, deleteErr(stackV1beta1, ns, "forge"), msg)

	deleteLock(t, ns, "by-beta")
	if err := deleteErr(stackV1beta1, ns, "forge"); err != nil {
		t.Fatalf("deleting through v1beta1 once unlocked: %v", err)
	}
}

// TestLocksStack: two Locks protect one target; removing one keeps it
// protected and the message names the other; the annotation tracks each
// step and disappears with the last Lock.
func TestLocksStack(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")
	createLock(t, framework.NewLock(ns, "b-lock", "Stack", "forge", "second"))
	waitAnnotation(t, stackV1alpha1, ns, "forge", "b-lock")
	createLock(t, framework.NewLock(ns, "a-lock", "Stack", "forge", "first"))
	waitAnnotation(t, stackV1alpha1, ns, "forge", "a-lock,b-lock")
	waitLockState(t, ns, "a-lock", active)
	waitLockState(t, ns, "b-lock", active)

	wantDenied(t, deleteErr(stackV1alpha1, ns, "forge"),
		"resource is protected by Lock(s) [a-lock b-lock]; delete the Lock(s) before deleting this resource (a-lock: first; b-lock: second)")

	deleteLock(t, ns, "a-lock")
	// The annotation changes once lockguard's cache has seen the delete;
	// until then the denial may still name both Locks (never neither).
	waitAnnotation(t, stackV1alpha1, ns, "forge", "b-lock")
	wantDenied(t, deleteErr(stackV1alpha1, ns, "forge"),
		"resource is protected by Lock(s) [b-lock]; delete the Lock(s) before deleting this resource (b-lock: second)")

	deleteLock(t, ns, "b-lock")
	waitAnnotation(t, stackV1alpha1, ns, "forge", "")
	if err := deleteErr(stackV1alpha1, ns, "forge"); err != nil {
		t.Fatalf("delete after the last Lock is gone: %v", err)
	}
}

// TestAnnotationRestored: a hand-edited or removed annotation comes back,
// and the object stays protected meanwhile (the webhook reads Locks).
func TestAnnotationRestored(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")
	createLock(t, framework.NewLock(ns, "keep", "Stack", "forge", ""))
	waitAnnotation(t, stackV1alpha1, ns, "forge", "keep")

	for _, patch := range []string{
		`{"metadata":{"annotations":{"core.navique.com/locked":"someone-else"}}}`,
		`{"metadata":{"annotations":{"core.navique.com/locked":null}}}`,
	} {
		u := object(stackV1alpha1, ns, "forge")
		if err := suite.client.Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", []byte(patch))); err != nil {
			t.Fatalf("patching the annotation: %v", err)
		}
		wantDenied(t, deleteErr(stackV1alpha1, ns, "forge"),
			"resource is protected by Lock(s) [keep]; delete the Lock(s) before deleting this resource")
		waitAnnotation(t, stackV1alpha1, ns, "forge", "keep")
	}
}

// TestInvalidTarget: a Lock on another group, on a Lock, or on a
// cluster-scoped kind is InvalidTarget and protects nothing.
func TestInvalidTarget(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")

	other := framework.NewLock(ns, "other-group", "Deployment", "forge", "")
	other.Spec.TargetRef.APIVersion = "apps/v1"
	createLock(t, other)
	lockOfLock := createLock(t, framework.NewLock(ns, "lock-of-lock", "Lock", "other-group", ""))
	region := createLock(t, framework.NewLock(ns, "cluster-scoped", "Region", "eu", ""))

	for name, wantMsg := range map[string]string{
		other.Name:      `only core.navique.com resources can be locked, and targetRef.apiVersion "apps/v1" is in group "apps"`,
		lockOfLock.Name: "a Lock cannot protect another Lock: deleting a Lock is never blocked",
		region.Name:     "Region.core.navique.com is cluster-scoped; a Lock protects resources in its own namespace",
	} {
		l := waitLockState(t, ns, name, invalidTarget)
		if got := l.Status.Conditions[0].Message; got != wantMsg {
			t.Errorf("Lock %s: Ready message %q, want %q", name, got, wantMsg)
		}
	}
	// The Lock that is the target of lock-of-lock can be deleted.
	deleteLock(t, ns, other.Name)
}

// TestMissingReference: a Lock whose target does not exist is
// MissingReference, protects the name anyway, and becomes active when the
// target is created.
func TestMissingReference(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createLock(t, framework.NewLock(ns, "early", "PostgresCluster", "db", ""))
	l := waitLockState(t, ns, "early", missingReference)
	if want := `PostgresCluster "db" not found in namespace "` + ns + `"; its deletion will be denied as soon as it is created`; l.Status.Conditions[0].Message != want {
		t.Errorf("Ready message %q, want %q", l.Status.Conditions[0].Message, want)
	}
	if l.Status.ObservedGeneration != l.Generation {
		t.Errorf("observedGeneration %d, want %d", l.Status.ObservedGeneration, l.Generation)
	}

	createObject(t, pgV1alpha1, ns, "db")
	wantDenied(t, deleteErr(pgV1alpha1, ns, "db"),
		"resource is protected by Lock(s) [early]; delete the Lock(s) before deleting this resource")
	waitAnnotation(t, pgV1alpha1, ns, "db", "early")
	waitLockState(t, ns, "early", active)
}

// TestOtherNamespace: a Lock protects only its own namespace.
func TestOtherNamespace(t *testing.T) {
	requireSuite(t)
	nsA, nsB := newNamespace(t), newNamespace(t)
	createObject(t, stackV1alpha1, nsB, "forge")
	createLock(t, framework.NewLock(nsA, "elsewhere", "Stack", "forge", ""))
	waitLockState(t, nsA, "elsewhere", missingReference)
	if err := deleteErr(stackV1alpha1, nsB, "forge"); err != nil {
		t.Fatalf("deleting an object protected only by a Lock in another namespace: %v", err)
	}
}

// TestUpdatesAndLockLifecycle: updates and patches of a locked object are
// allowed; Locks can be created, edited and deleted freely; targetRef is
// immutable and validated.
func TestUpdatesAndLockLifecycle(t *testing.T) {
	requireSuite(t)
	ctx := context.Background()
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")
	createLock(t, framework.NewLock(ns, "guard", "Stack", "forge", "v1"))
	waitAnnotation(t, stackV1alpha1, ns, "forge", "guard")

	u := object(stackV1alpha1, ns, "forge")
	if err := suite.client.Patch(ctx, u, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"size":3},"metadata":{"labels":{"tier":"prod"}}}`))); err != nil {
		t.Fatalf("patching a locked object: %v", err)
	}
	if err := suite.client.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = map[string]any{"size": int64(4)}
	if err := suite.client.Update(ctx, u); err != nil {
		t.Fatalf("updating a locked object: %v", err)
	}

	var l lockv1alpha1.Lock
	if err := suite.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "guard"}, &l); err != nil {
		t.Fatal(err)
	}
	if got := l.Spec.TargetRef.APIVersion; got != lockv1alpha1.DefaultTargetAPIVersion {
		t.Errorf("defaulted targetRef.apiVersion = %q, want %q", got, lockv1alpha1.DefaultTargetAPIVersion)
	}
	l.Spec.Reason = "v2"
	if err := suite.client.Update(ctx, &l); err != nil {
		t.Fatalf("updating a Lock's reason: %v", err)
	}
	// The denial quotes the reason from lockguard's cache, which has the
	// edit once the reconciler has observed the new generation.
	waitObserved(t, ns, "guard", l.Generation)
	wantDenied(t, deleteErr(stackV1alpha1, ns, "forge"),
		"resource is protected by Lock(s) [guard]; delete the Lock(s) before deleting this resource (guard: v2)")

	err := suite.client.Patch(ctx, &l, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"targetRef":{"name":"other"}}}`)))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "targetRef is immutable: delete this Lock and create a new one to protect another resource") {
		t.Errorf("changing targetRef: got %v, want Invalid with the immutability message", err)
	}

	for name, spec := range map[string]lockv1alpha1.LockSpec{
		"empty-kind":  {TargetRef: lockv1alpha1.TargetReference{Name: "x"}},
		"empty-name":  {TargetRef: lockv1alpha1.TargetReference{Kind: "Stack"}},
		"long-reason": {TargetRef: lockv1alpha1.TargetReference{Kind: "Stack", Name: "x"}, Reason: strings.Repeat("r", 1025)},
	} {
		bad := &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
		if err := suite.client.Create(ctx, bad); !apierrors.IsInvalid(err) {
			t.Errorf("creating Lock %s: got %v, want Invalid", name, err)
		}
	}

	deleteLock(t, ns, "guard")
	waitAnnotation(t, stackV1alpha1, ns, "forge", "")
}

// TestDeleteCollection: a deletecollection request (the API server asks
// about each object, naming it only in oldObject) never deletes the locked
// Stack; `kubectl delete stacks --all` (one DELETE per object) deletes every
// unlocked Stack and keeps the locked one.
func TestDeleteCollection(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	for _, n := range []string{"a", "b", "c", "d"} {
		createObject(t, stackV1alpha1, ns, n)
	}
	createLock(t, framework.NewLock(ns, "keep-b", "Stack", "b", ""))
	waitLockState(t, ns, "keep-b", active)

	// The API server stops a deletecollection at the first denied object,
	// so which unlocked Stacks it deleted before that is up to it.
	err := suite.client.DeleteAllOf(context.Background(), object(stackV1alpha1, ns, ""), client.InNamespace(ns))
	wantDenied(t, err, "resource is protected by Lock(s) [keep-b]; delete the Lock(s) before deleting this resource")
	if _, _, err := annotation(stackV1alpha1, ns, "b"); err != nil {
		t.Fatalf("the locked Stack after deletecollection: %v", err)
	}

	_, stderr, err := kubectl("delete", "stacks", "--all", "-n", ns)
	if code := exitCode(err); code != 1 {
		t.Fatalf("kubectl delete stacks --all: exit code %d, want 1 (stderr %q)", code, stderr)
	}
	want := `Error from server (Forbidden): admission webhook "delete.lockguard.core.navique.com" denied the request: resource is protected by Lock(s) [keep-b]; delete the Lock(s) before deleting this resource`
	if got := trim(stderr); got != want {
		t.Fatalf("kubectl delete stacks --all stderr:\n  %s\nwant\n  %s", got, want)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(stackV1alpha1.GroupVersion().WithKind("StackList"))
	if err := suite.client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, it := range list.Items {
		if it.GetDeletionTimestamp() == nil {
			names = append(names, it.GetName())
		}
	}
	if fmt.Sprint(names) != "[b]" {
		t.Fatalf("Stacks left after kubectl delete --all: %v, want [b]", names)
	}
}

// TestDryRun: a server-side dry-run delete gets the same denial and changes
// nothing.
func TestDryRun(t *testing.T) {
	requireSuite(t)
	ns := newNamespace(t)
	createObject(t, stackV1alpha1, ns, "forge")
	createLock(t, framework.NewLock(ns, "dry", "Stack", "forge", ""))
	waitLockState(t, ns, "dry", active)
	wantDenied(t, deleteErr(stackV1alpha1, ns, "forge", client.DryRunAll),
		"resource is protected by Lock(s) [dry]; delete the Lock(s) before deleting this resource")
	if _, _, err := annotation(stackV1alpha1, ns, "forge"); err != nil {
		t.Fatalf("the Stack after a dry-run delete: %v", err)
	}
}
