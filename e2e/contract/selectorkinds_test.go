package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// selectorKindsFix ends the InvalidTarget message of a selector Lock with
// a kind not served as written (controller/selectorkinds.go).
const selectorKindsFix = " (this Lock is not active while one of its kinds is not served as written%s; the selector cannot be changed: " +
	"create a Lock whose kinds are spelled as kubectl api-resources --api-group=core.navique.com lists them, then delete this one)"

// TestSelectorKindsTruthful (docs/contract.md rule 13, issue 40): a
// selector Lock whose kinds name one the group does not serve as written
// (misspelled, not installed, cluster-scoped) never reports itself
// active: InvalidTarget, with the targetRef path's "did you mean" and how
// to fix it. The webhook agrees: a Lock that names only such kinds covers
// nothing (a dry-run DELETE is allowed, status.protected is 0); one that
// also names a served kind still protects that kind's objects, which its
// status.protected lists and their annotation names.
func TestSelectorKindsTruthful(t *testing.T) {
	ctx := t.Context()
	tierDB := map[string]string{"tier": "db"}
	selector := func(kinds ...string) lockv1alpha1.LockSelector {
		return lockv1alpha1.LockSelector{MatchLabels: tierDB, Kinds: kinds}
	}

	nothing := kube.NewNamespace(t, "selkinds")
	createLabelledStack(t, nothing, "db", tierDB)
	cases := []struct {
		lock *lockv1alpha1.Lock
		want string
	}{
		{framework.NewSelectorLock(nothing, "plural", selector("Stacks")),
			`selector.kinds: core.navique.com serves no kind "Stacks"; did you mean Stack?` + fmt.Sprintf(selectorKindsFix, "")},
		{framework.NewSelectorLock(nothing, "uninstalled", selector("Gateway")),
			`selector.kinds: core.navique.com serves no kind "Gateway" (is its CustomResourceDefinition installed? kubectl api-resources --api-group=core.navique.com lists the kinds served)` +
				fmt.Sprintf(selectorKindsFix, "")},
		{framework.NewSelectorLock(nothing, "cluster", selector("Region")),
			"selector.kinds: Region.core.navique.com is cluster-scoped; a Lock protects resources in its own namespace" + fmt.Sprintf(selectorKindsFix, "")},
	}
	for _, tc := range cases {
		kube.CreateLock(t, tc.lock)
	}
	for _, tc := range cases {
		kube.WaitLockStatus(t, tc.lock, framework.InvalidStatus(tc.want))
		wantProtected(t, tc.lock, &lockv1alpha1.ProtectedStatus{Count: 0})
	}
	if err := kube.DeleteObject(ctx, framework.StackGVK, nothing, "db", client.DryRunAll); err != nil {
		t.Errorf("dry-run DELETE of a Stack that only Locks of unserved kinds select: %v; want it allowed, as their status says", err)
	}
	// The namespace guard errs towards denying where it cannot map a kind
	// (docs/limits.md, Kind spelling): the Locks of kinds it cannot map
	// hold their namespace.
	err := kube.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nothing}}, client.DryRunAll)
	if want := "namespace is protected by Lock(s) [plural uninstalled]"; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want) {
		t.Errorf("dry-run DELETE of namespace %s: %v; want Forbidden with %q", nothing, err, want)
	}

	mixed := kube.NewNamespace(t, "selkindsmix")
	createLabelledStack(t, mixed, "db", tierDB)
	both := kube.CreateLock(t, framework.NewSelectorLock(mixed, "both", selector("Stack", "Stacks")))
	kube.WaitLockStatus(t, both, framework.InvalidStatus(`selector.kinds: core.navique.com serves no kind "Stacks"; did you mean Stack?`+
		fmt.Sprintf(selectorKindsFix, ", though the resources of its other kinds that it matches stay protected: status.protected")))
	wantProtected(t, both, &lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: "Stack", Name: "db"}}})
	kube.WaitDenied(t, framework.StackGVK, mixed, "db", both)
	waitAnnotation(t, mixed, "db", both.Name)

	if err := kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: []string{nothing, mixed}}); err != nil {
		t.Errorf("docs/contract.md rule 13:\n%v", err)
	}
}

// wantProtected waits until the status.protected of l is want.
func wantProtected(t *testing.T, l *lockv1alpha1.Lock, want *lockv1alpha1.ProtectedStatus) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, "status.protected of Lock "+l.Name, func(ctx context.Context) error {
		got, err := readLock(ctx, l)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(want, got.Status.Protected); diff != "" {
			return fmt.Errorf("-want, +got:\n%s", diff)
		}
		return nil
	})
}

// waitAnnotation waits until Stack name in ns carries the lock annotation
// want.
func waitAnnotation(t *testing.T, ns, name, want string) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, "the lock annotation of Stack "+name, func(ctx context.Context) error {
		u, err := kube.GetObject(ctx, framework.StackGVK, ns, name)
		if err != nil {
			return err
		}
		if got := u.GetAnnotations()[lockv1alpha1.LockedAnnotation]; got != want {
			return fmt.Errorf("annotation %q, want %q", got, want)
		}
		return nil
	})
}
