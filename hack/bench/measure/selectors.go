package measure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// DeleteRounds is how many rounds MeasureSelectors splits its deletes
// into.
const DeleteRounds = 5

// MedianRatio is the median of RoundRatios.
func (r *SelectorsResult) MedianRatio() float64 {
	rs := slices.Clone(r.RoundRatios)
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	return rs[len(rs)/2]
}

// SelectorsResult is what MeasureSelectors measured (issue 24): the cost
// of selector Locks to a delete they do not cover, and of the update
// guard to an update of an object no ReadOnly Lock covers.
type SelectorsResult struct {
	// Locks is how many Locks each namespace holds: targetRef Locks in
	// one, selector Locks in the other, each on one Stack of its own.
	Locks int
	// TargetRef and Selector are server-side dry-run DELETEs of an
	// unlocked Stack of each namespace through kube-apiserver and
	// lockguard's webhook (allowed), interleaved one by one.
	TargetRef, Selector Latencies
	// RoundRatios are the p99 ratios, selector over targetRef, of each
	// round of DeleteRounds (the deletes split evenly): the p99 of a
	// round is a few samples, so one round's ratio is noise on a shared
	// machine, and the target reads their median.
	RoundRatios []float64
	// UpdateOn and UpdateOff are merge patches of the spec of an unlocked
	// Stack, with the chart's update entry installed and without it
	// (guards.readOnly.enabled=false), in alternating rounds.
	UpdateOn, UpdateOff Latencies
	// UpdateReviews is how many updates lockguard's update guard reviewed
	// during the UpdateOn rounds (its lockguard_admission_reviews_total).
	UpdateReviews float64
	// Rounds of the update measurement, each way.
	Rounds int
}

// MeasureSelectors starts binary (default flags) on a control plane that
// has lockguard's webhook configuration, creates namespaces with locks
// targetRef Locks and locks selector Locks (matchLabels, each covering
// one labelled Stack of its own), waits until lockguard denies deleting
// the last locked Stack of each, and measures: deletes dry-run deletes of
// an unlocked Stack of each namespace, alternately; then, rounds times
// each way, updates updates of an unlocked Stack with and without the
// update entry.
func (c *Cluster) MeasureSelectors(ctx context.Context, binary string, locks, deletes, rounds, updates int) (*SelectorsResult, error) {
	const refNS, selNS, label = "bench-sel-ref", "bench-sel-sel", "bench-tier"
	lg, err := c.StartLockguard(binary)
	if err != nil {
		return nil, err
	}
	defer lg.Stop()
	if _, err := lg.WaitReady(ctx); err != nil {
		return nil, err
	}
	if err := lg.WaitWarm(ctx); err != nil {
		return nil, err
	}
	for _, ns := range []string{refNS, selNS} {
		if err := c.CreateNamespace(ctx, ns); err != nil {
			return nil, err
		}
		if err := c.Client.Create(ctx, Stack(ns, "free", 256)); client.IgnoreAlreadyExists(err) != nil {
			return nil, err
		}
	}
	err = Parallel(ctx, locks, 8, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("t-%d", i)
		ref, sel := Stack(refNS, name, 256), Stack(selNS, name, 256)
		sel.SetLabels(map[string]string{label: name})
		selLock := &lockv1alpha1.Lock{}
		selLock.Namespace, selLock.Name = selNS, "keep-"+name
		selLock.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{label: name}}
		for _, o := range []client.Object{ref, sel, LockOn(refNS, "keep-"+name, name), selLock} {
			if err := retry(ctx, func() error { return client.IgnoreAlreadyExists(c.Client.Create(ctx, o)) }); err != nil {
				return fmt.Errorf("creating %s %s/%s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetNamespace(), o.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cl, err := client.New(Unthrottled(c.Config), client.Options{Scheme: c.Scheme})
	if err != nil {
		return nil, err
	}
	dryRun := func(ns, name string) (time.Duration, error) {
		start := time.Now()
		err := cl.Delete(ctx, Stack(ns, name, 0), client.DryRunAll)
		return time.Since(start), err
	}
	last := fmt.Sprintf("t-%d", locks-1)
	for _, ns := range []string{refNS, selNS} {
		if err := waitFor(ctx, func() error {
			if _, err := dryRun(ns, last); !apierrors.IsForbidden(err) {
				return fmt.Errorf("dry-run delete of the last locked Stack of %s: %v, want Forbidden", ns, err)
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	r := &SelectorsResult{Locks: locks, Rounds: rounds}
	for range DeleteRounds {
		var ref, sel Latencies
		for range deletes / DeleteRounds {
			for _, ns := range []string{refNS, selNS} {
				d, err := dryRun(ns, "free")
				if err != nil {
					return nil, fmt.Errorf("dry-run delete of unlocked Stack %s/free: %w", ns, err)
				}
				if ns == refNS {
					ref.Add(d)
				} else {
					sel.Add(d)
				}
			}
		}
		r.RoundRatios = append(r.RoundRatios, float64(sel.Quantile(0.99))/float64(max(ref.Quantile(0.99), 1)))
		r.TargetRef.Merge(&ref)
		r.Selector.Merge(&sel)
	}
	if err := c.updateRounds(ctx, cl, lg, r, refNS, updates); err != nil {
		return nil, err
	}
	return r, nil
}

// updateRounds measures r's update latencies: r.Rounds rounds of updates
// merge patches of Stack ns/free with the chart's update entry installed,
// each followed by a round without it, and the update guard's reviews. It
// leaves the chart's default webhook configuration installed.
func (c *Cluster) updateRounds(ctx context.Context, cl client.Client, lg *Lockguard, r *SelectorsResult, ns string, updates int) error {
	defer func() { _ = c.InstallWebhook(context.Background()) }()
	n := 0
	patch := func() (time.Duration, error) {
		n++
		p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"payload":"%d"}}`, n))
		start := time.Now()
		err := cl.Patch(ctx, Stack(ns, "free", 0), p)
		return time.Since(start), err
	}
	for range r.Rounds {
		for _, on := range []bool{true, false} {
			var set []string
			if !on {
				set = []string{"guards.readOnly.enabled=false"}
			}
			if _, err := c.Webhook.InstallChart(ctx, c.Client, set...); err != nil {
				return err
			}
			// The API server's webhook configuration informer takes the
			// change a moment later.
			time.Sleep(2 * time.Second)
			before, err := updateReviews(lg)
			if err != nil {
				return err
			}
			for range updates {
				d, err := patch()
				if err != nil {
					return fmt.Errorf("updating unlocked Stack %s/free: %w", ns, err)
				}
				if on {
					r.UpdateOn.Add(d)
				} else {
					r.UpdateOff.Add(d)
				}
			}
			after, err := updateReviews(lg)
			if err != nil {
				return err
			}
			if on {
				r.UpdateReviews += after - before
			}
		}
	}
	return nil
}

// updateReviews is the sum of lg's lockguard_admission_reviews_total of
// the update guard.
func updateReviews(lg *Lockguard) (float64, error) {
	m, err := lg.Metrics()
	if err != nil {
		return 0, err
	}
	var n float64
	for k, v := range m {
		if strings.HasPrefix(k, "lockguard_admission_reviews_total{") && strings.Contains(k, `guard="`+webhook.GuardReadOnly+`"`) {
			n += v
		}
	}
	return n, nil
}
