package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// kindMessage is the API server's message for a targetRef.kind that is not
// Kind-shaped (the CRD's CEL rule).
const kindMessage = "kind must be the resource's Kind as the API serves it, e.g. Stack (not stack or stacks)"

// TestMisspelledKinds (docs/contract.md rule 13): a Lock whose kind is spelled
// other than as the API serves it (stack, stacks, Stacks, StAck) never
// reports itself active. The API server refuses the spellings that are
// not Kind-shaped, with a message that says what to write; lockguard
// reports the others InvalidTarget with the served kind to write. And a
// misspelled Lock does not make lockguard rewrite a correctly locked
// Stack elsewhere: its resourceVersion stays put.
func TestMisspelledKinds(t *testing.T) {
	ctx := t.Context()
	nsA := kube.NewNamespace(t, "spelled")
	kube.CreateObject(t, framework.StackGVK, nsA, "web")
	web := kube.CreateLock(t, framework.NewLock(nsA, "web-lock", "Stack", "web", ""))
	kube.WaitActive(t, web)

	nsB := kube.NewNamespace(t, "misspelled")
	kube.CreateObject(t, framework.StackGVK, nsB, "lowt")
	refused := map[string]bool{}
	var created []*lockv1alpha1.Lock
	for _, kind := range []string{"stack", "stacks", "Stacks", "StAck"} {
		l := framework.NewLock(nsB, "spell-"+strings.ToLower(kind)+fmt.Sprint(len(created)), kind, "lowt", "")
		err := kube.Client.Create(ctx, l)
		switch {
		case err == nil:
			created = append(created, l)
		case apierrors.IsInvalid(err) && strings.Contains(err.Error(), kindMessage):
			refused[kind] = true
			t.Logf("a Lock of kind %q: %v", kind, err)
		default:
			t.Fatalf("creating a Lock of kind %q: got %v, want it created or refused with %q", kind, err, kindMessage)
		}
	}
	// Every Lock gets a status, and every status tells the truth.
	for _, l := range created {
		framework.Eventually(t, framework.DefaultTimeout, "status of "+l.Name, func(ctx context.Context) error {
			var got lockv1alpha1.Lock
			if err := kube.Client.Get(ctx, client.ObjectKeyFromObject(l), &got); err != nil {
				return err
			}
			if got.Status.ObservedGeneration != got.Generation || len(got.Status.Conditions) == 0 {
				return fmt.Errorf("no status yet")
			}
			return nil
		})
	}
	if err := kube.CheckLockStatusTruth(ctx, framework.TruthOptions{Namespaces: []string{nsA, nsB}}); err != nil {
		t.Errorf("docs/contract.md rule 13:\n%v", err)
	}

	// The correctly locked Stack in the other namespace is left alone.
	before := kube.MustExist(t, framework.StackGVK, nsA, "web").GetResourceVersion()
	framework.Consistently(t, 3*time.Second, "Stack web left alone while misspelled Locks exist", func(ctx context.Context) error {
		u, err := kube.GetObject(ctx, framework.StackGVK, nsA, "web")
		if err != nil {
			return err
		}
		if rv, ann := u.GetResourceVersion(), u.GetAnnotations()[lockv1alpha1.LockedAnnotation]; rv != before || ann != "web-lock" {
			return fmt.Errorf("Stack %s/web rewritten: resourceVersion %s (was %s), annotation %q", nsA, rv, before, ann)
		}
		return nil
	})

	// What each spelling gets.
	for _, kind := range []string{"stack", "stacks"} {
		if !refused[kind] {
			t.Errorf("a Lock of kind %q was created; want it refused with %q", kind, kindMessage)
		}
	}
	for _, l := range created {
		kube.WaitLockStatus(t, l, framework.InvalidStatus(fmt.Sprintf(
			"%s serves no kind %q; did you mean Stack? (targetRef cannot be changed: create a Lock of kind Stack, then delete this one)", lockv1alpha1.Group, l.Spec.TargetRef.Kind)))
	}
	// kubectl explain says what to write.
	r := kube.Kubectl(t, "", "explain", "lock.spec.targetRef.kind")
	if r.Code != 0 || !strings.Contains(strings.Join(strings.Fields(r.Stdout), " "), "Kind of the target, exactly as the API serves it") {
		t.Errorf("kubectl explain lock.spec.targetRef.kind: exit %d, does not say how to spell the kind:\n%s", r.Code, r.Stdout)
	}
	kube.WaitDenied(t, framework.StackGVK, nsA, "web", web)
	if err := kube.DeleteObject(ctx, framework.StackGVK, nsB, "lowt", client.DryRunAll); err != nil {
		t.Errorf("dry-run DELETE of a Stack that only misspelled Locks name: %v", err)
	}
}
