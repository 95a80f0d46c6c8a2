package contract_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/webhook"
)

// naviqueOperator is the chart's default exempt principal
// (readOnly.exemptPrincipals), which the suite's webhook configuration
// renders.
const naviqueOperator = "system:serviceaccount:navique-system:navique-operator"

// TestReadOnly: a ReadOnly Lock (docs/contract.md rules 7 and 16) labels what it
// covers and says so (ReadOnly condition InForce, after Pending if the
// reconciler was seen before the labels), then refuses a person's spec
// change (UPDATE and PATCH, dry run alike) and label removal, naming the
// Lock, while the same change by the exempt navique operator and a status
// update go through; setting the level back to CanNotDelete lifts the
// freeze and removes the label and the condition.
func TestReadOnly(t *testing.T) {
	ns := kube.NewNamespace(t, "readonly")
	createLabelledStack(t, ns, "db", map[string]string{"tier": "db"})
	frozen := framework.NewSelectorLock(ns, "freeze", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}})
	frozen.Spec.Level, frozen.Spec.Reason = lockv1alpha1.LevelReadOnly, "change window"
	created := time.Now()
	frozen = kube.CreateLock(t, frozen)
	seen := waitReadOnly(t, frozen, lockv1alpha1.ReasonInForce)
	t.Logf("ReadOnly InForce %s after the Lock's create (conditions seen: %v)", time.Since(created).Round(time.Millisecond), seen)
	for _, r := range seen[:len(seen)-1] {
		if r != lockv1alpha1.ReasonPending {
			t.Errorf("ReadOnly condition went through %v; want only Pending before InForce", seen)
		}
	}
	waitLabel(t, ns, "db", true)

	specChange := func(c client.Client, opts ...client.UpdateOption) error {
		u, err := kube.GetObject(t.Context(), framework.StackGVK, ns, "db")
		if err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, "large", "spec", "size"); err != nil {
			t.Fatal(err)
		}
		return c.Update(t.Context(), u, opts...)
	}
	person := kube.Impersonate(t, restConfig(t), ns, "db", "jane@example.com")
	want := webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*frozen}, "spec")
	t.Run("PersonRefused", func(t *testing.T) {
		wantRefused(t, specChange(person), want)
		wantRefused(t, specChange(person, client.DryRunAll), want)
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":"huge"}}`))
		wantRefused(t, person.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "db"), patch), want)
	})
	t.Run("LabelRemovalRefused", func(t *testing.T) {
		for _, label := range []string{"tier", lockv1alpha1.ReadOnlyLabel} {
			patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+label+`":null}}}`))
			err := person.Patch(t.Context(), framework.Object(framework.StackGVK, ns, "db"), patch)
			wantRefused(t, err, webhook.UpdateDenialMessage([]lockv1alpha1.Lock{*frozen}, "metadata.labels["+label+"]"))
		}
	})
	t.Run("StatusAllowed", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Ready"}}`))
		if err := person.Status().Patch(t.Context(), framework.Object(framework.StackGVK, ns, "db"), patch); err != nil {
			t.Errorf("status update of a ReadOnly object: %v; want it allowed", err)
		}
	})
	t.Run("ExemptAllowed", func(t *testing.T) {
		if err := specChange(kube.Impersonate(t, restConfig(t), ns, "db", naviqueOperator, "system:serviceaccounts")); err != nil {
			t.Errorf("the same spec change by the exempt %s: %v; want it allowed", naviqueOperator, err)
		}
	})
	t.Run("Denials", func(t *testing.T) {
		l, err := readLock(t.Context(), frozen)
		if err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, framework.DefaultTimeout, "the refused update in lastDenied", func(ctx context.Context) error {
			if l, err = readLock(ctx, frozen); err != nil {
				return err
			}
			if d := l.Status.LastDenied; d == nil || d.Operation != "UPDATE" || d.Kind != "Stack" || d.Name != "db" {
				return fmt.Errorf("lastDenied %+v, want an UPDATE of Stack db", d)
			}
			return nil
		})
	})
	t.Run("BackToCanNotDelete", func(t *testing.T) {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"level":"CanNotDelete"}}`))
		if err := kube.Client.Patch(t.Context(), frozen.DeepCopy(), patch); err != nil {
			t.Fatal(err)
		}
		waitLabel(t, ns, "db", false)
		framework.Eventually(t, framework.DefaultTimeout, "no ReadOnly condition", func(ctx context.Context) error {
			l, err := readLock(ctx, frozen)
			if err != nil {
				return err
			}
			if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReadOnly); c != nil {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		framework.Eventually(t, framework.DefaultTimeout, "a person's spec change allowed", func(context.Context) error {
			return specChange(person)
		})
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "db", client.DryRunAll), frozen)
	})
}

// TestReadOnlyNeverAsked: an object under no ReadOnly Lock (none, or a
// CanNotDelete Lock) is updated without any call to lockguard: its update
// guard's review count does not move (docs/contract.md rule 7).
func TestReadOnlyNeverAsked(t *testing.T) {
	inProcess(t)
	ns := kube.NewNamespace(t, "roquiet")
	kube.CreateObject(t, framework.StackGVK, ns, "free")
	kube.CreateObject(t, framework.StackGVK, ns, "kept")
	kube.WaitActive(t, kube.CreateLock(t, framework.NewLock(ns, "keep", "Stack", "kept", "")))
	before := readOnlyReviews(t)
	for _, name := range []string{"free", "kept"} {
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"size":"large"},"metadata":{"labels":{"tier":"web"}}}`))
		if err := kube.Client.Patch(t.Context(), framework.Object(framework.StackGVK, ns, name), patch); err != nil {
			t.Fatalf("updating Stack %s: %v", name, err)
		}
	}
	if after := readOnlyReviews(t); after != before {
		t.Errorf("lockguard answered %v update reviews for objects under no ReadOnly Lock; want none", after-before)
	}
}

// waitReadOnly waits until Lock l's ReadOnly condition has reason, and
// returns the reasons it saw on the way, in order, without repeats.
func waitReadOnly(t *testing.T, l *lockv1alpha1.Lock, reason string) []string {
	t.Helper()
	var seen []string
	framework.Eventually(t, framework.DefaultTimeout, "ReadOnly "+reason, func(ctx context.Context) error {
		got, err := readLock(ctx, l)
		if err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReadOnly)
		if c == nil {
			return fmt.Errorf("no ReadOnly condition")
		}
		if len(seen) == 0 || seen[len(seen)-1] != c.Reason {
			seen = append(seen, c.Reason)
		}
		if c.Reason != reason {
			return fmt.Errorf("ReadOnly %s: %s", c.Reason, c.Message)
		}
		return nil
	})
	return seen
}

// waitLabel waits until Stack ns/name carries ReadOnlyLabel=true (want)
// or does not.
func waitLabel(t *testing.T, ns, name string, want bool) {
	t.Helper()
	framework.Eventually(t, framework.DefaultTimeout, fmt.Sprintf("Stack %s labelled %s: %t", name, lockv1alpha1.ReadOnlyLabel, want), func(ctx context.Context) error {
		u, err := kube.GetObject(ctx, framework.StackGVK, ns, name)
		if err != nil {
			return err
		}
		if got := u.GetLabels()[lockv1alpha1.ReadOnlyLabel] == "true"; got != want {
			return fmt.Errorf("labels %v", u.GetLabels())
		}
		return nil
	})
}

// wantRefused checks that err is the update guard's refusal with message.
func wantRefused(t *testing.T, err error, message string) {
	t.Helper()
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), message) {
		t.Errorf("update error %v; want Forbidden: %s", err, message)
	}
}

// readOnlyReviews is the number of updates the update guard of the
// lockguard in this process has answered.
func readOnlyReviews(t *testing.T) float64 {
	t.Helper()
	return counterSum(t, "lockguard_admission_reviews_total", map[string]string{"guard": webhook.GuardReadOnly})
}
