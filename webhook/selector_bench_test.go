package webhook_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// selectorBenchLocks is how many Locks the namespace of
// BenchmarkDecideSelectorLocks holds (issue 24: 100).
const selectorBenchLocks = 100

// BenchmarkDecideSelectorLocks compares one allowed DELETE decision
// (Handler.Decide, on a decoded request) in a namespace of 100 selector
// Locks, none of which matches the object, with the same decision in a
// namespace of 100 targetRef Locks, none of which targets it (issue 24:
// within 1.1× of each other through the API server; hack/bench's
// selectors section measures that). The two caches live in the same heap,
// and the benchmark alternates between them in short batches, so that a
// noisy machine slows both alike. It reports the time of each
// (ns/decision-targetRef, ns/decision-selector) and the median of the
// per-round ratios (ratio-selector/targetRef); the ns/op of the benchmark
// itself is meaningless.
//
//	go test -run '^$' -bench BenchmarkDecideSelectorLocks ./webhook
func BenchmarkDecideSelectorLocks(b *testing.B) {
	handlers := []*webhook.Handler{
		webhook.NewHandler(webhook.Config{Locks: lockIndexOf(b, benchLocks(selectorBenchLocks))}),
		webhook.NewHandler(webhook.Config{Locks: lockIndexOf(b, benchSelectorLocks(selectorBenchLocks))}),
	}
	req := webhook.Request{
		UID:       "705ab4f5-6393-11e8-b7cc-42010a800002",
		Operation: admissionv1.Delete,
		Kind:      metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
		Namespace: "ns-0",
		Name:      "stack-unlocked",
	}
	req.OldObject.Metadata.Name = req.Name
	req.OldObject.Metadata.Labels = map[string]string{"app.kubernetes.io/name": "forge", "app.kubernetes.io/part-of": "navique", "tier": "web"}
	ctx := context.Background()
	for _, h := range handlers {
		if resp := h.Decide(ctx, req); !resp.Allowed {
			b.Fatalf("the DELETE of an object no Lock covers is refused: %+v", resp.Result)
		}
	}
	const batch = 200
	var total [2]time.Duration
	var ratios []float64
	for b.Loop() {
		var took [2]time.Duration
		for i, h := range handlers {
			start := time.Now()
			for range batch {
				h.Decide(ctx, req)
			}
			took[i] = time.Since(start)
			total[i] += took[i]
		}
		ratios = append(ratios, float64(took[1])/float64(took[0]))
	}
	decisions := float64(len(ratios) * batch)
	b.ReportMetric(float64(total[0].Nanoseconds())/decisions, "ns/decision-targetRef")
	b.ReportMetric(float64(total[1].Nanoseconds())/decisions, "ns/decision-selector")
	b.ReportMetric(median(ratios), "ratio-selector/targetRef")
}

// benchSelectorLocks returns n live selector Locks of namespace ns-0,
// settled as the reconciler leaves them: half of them select by label
// (tier=db-<j>), the others by an expression and kinds (tier In
// cache-<j>, queue-<j>, for Stacks and PostgresClusters). None covers an
// object labelled tier=web.
func benchSelectorLocks(n int) *lockv1alpha1.LockList {
	list := &lockv1alpha1.LockList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	list.Items = make([]lockv1alpha1.Lock, n)
	created := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for j := range list.Items {
		s := &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": fmt.Sprintf("db-%d", j)}}
		if j%2 == 1 {
			s = &lockv1alpha1.LockSelector{
				MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "tier", Operator: lockv1alpha1.SelectorOpIn, Values: []string{fmt.Sprintf("cache-%d", j), fmt.Sprintf("queue-%d", j)}}},
				Kinds:            []string{"Stack", "PostgresCluster"},
			}
		}
		list.Items[j] = lockv1alpha1.Lock{
			TypeMeta: metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "ns-0", Name: fmt.Sprintf("lock-%d", j),
				UID:             types.UID(fmt.Sprintf("00000000-0000-0000-0001-%012d", j)),
				ResourceVersion: "1", Generation: 1, CreationTimestamp: created,
			},
			Spec: lockv1alpha1.LockSpec{
				Selector: s,
				Reason:   "Production environment - remove this Lock deliberately before deleting.",
			},
			Status: lockv1alpha1.LockStatus{
				Active:             true,
				ObservedGeneration: 1,
				Conditions: []metav1.Condition{{
					Type: lockv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: lockv1alpha1.ReasonActive,
					Message:            `deleting the resources of namespace "ns-0" that this Lock's selector matches is denied while this Lock exists`,
					ObservedGeneration: 1, LastTransitionTime: created,
				}},
			},
		}
	}
	return list
}
