package main

import (
	"context"
	"fmt"
	"strings"
)

// runSelectors measures issue 24's targets on a control plane of its own:
// an allowed DELETE with selector Locks in the namespace against one with
// targetRef Locks, and an UPDATE of an object no ReadOnly Lock covers with
// and without the update guard's webhook entry.
func runSelectors(ctx context.Context, o options, r *report) error {
	c, err := sectionCluster(ctx, o, "Selector Locks and the update guard")
	if err != nil {
		return err
	}
	defer c.Stop()
	locks := 100
	step("Selector Locks: %d targetRef and %d selector Locks, allowed dry-run DELETEs interleaved; UPDATEs with and without the update entry", locks, locks)
	res, err := c.MeasureSelectors(ctx, o.lockguard, locks, o.n(2000, 300), 4, o.n(500, 100))
	if err != nil {
		return fmt.Errorf("selectors: %w", err)
	}
	r.selectors = res
	return nil
}

// selectorsSummary writes issue 24's rows of the targets table.
func (r *report) selectorsSummary(w writer) {
	s := r.selectors
	if s == nil {
		return
	}
	rounds := make([]string, len(s.RoundRatios))
	for i, x := range s.RoundRatios {
		rounds[i] = fmt.Sprintf("%.2f", x)
	}
	w("| 24 | allowed DELETE p99 with %d selector Locks in the namespace ≤ 1.1× with %d targetRef Locks | median of %d rounds %.2f× (rounds %s; all deletes %s vs %s) | %s |\n",
		s.Locks, s.Locks, len(s.RoundRatios), s.MedianRatio(), strings.Join(rounds, ", "), ms(s.Selector.Quantile(0.99)), ms(s.TargetRef.Quantile(0.99)), metOrMissed(s.MedianRatio() <= 1.1))
	w("| 24 | an UPDATE of an object no ReadOnly Lock covers never calls lockguard | %.0f update reviews in %d updates; p50 %.2f× and p99 %.2f× the same updates without the update entry | %s |\n",
		s.UpdateReviews, s.UpdateOn.Len(), ratio(s.UpdateOn.Quantile(0.5), s.UpdateOff.Quantile(0.5)), ratio(s.UpdateOn.Quantile(0.99), s.UpdateOff.Quantile(0.99)), metOrMissed(s.UpdateReviews == 0))
}

// selectorsSection writes issue 24's measurements.
func (r *report) selectorsSection(w writer) {
	s := r.selectors
	if s == nil {
		return
	}
	w("## Selector Locks and the update guard (issue 24)\n\n")
	w("A control plane of its own, lockguard with default flags. One namespace holds %d Stacks each under a targetRef Lock, another %d Stacks each labelled for a selector Lock of its own (matchLabels); server-side dry-run DELETEs of an unlocked Stack of each namespace (allowed), one after the other through kube-apiserver and lockguard's webhook, in %d rounds (the target reads the median of the rounds' p99 ratios: a p99 is a few samples, noise on a shared machine):\n\n", s.Locks, s.Locks, len(s.RoundRatios))
	w("| namespace | deletes | p50 | p99 |\n|---|---|---|---|\n")
	w("| %d targetRef Locks | %d | %s | %s |\n", s.Locks, s.TargetRef.Len(), ms(s.TargetRef.Quantile(0.5)), ms(s.TargetRef.Quantile(0.99)))
	w("| %d selector Locks | %d | %s | %s |\n\n", s.Locks, s.Selector.Len(), ms(s.Selector.Quantile(0.5)), ms(s.Selector.Quantile(0.99)))
	w("Merge patches of the spec of an unlocked Stack, %d rounds each way, alternating: with the chart's update entry (`update.lockguard.core.navique.com`, objectSelector on `core.navique.com/read-only`) and with `guards.readOnly.enabled=false` (no entry). lockguard's update guard reviewed %.0f of them.\n\n", s.Rounds, s.UpdateReviews)
	w("| update entry | updates | p50 | p99 |\n|---|---|---|---|\n")
	w("| installed | %d | %s | %s |\n", s.UpdateOn.Len(), ms(s.UpdateOn.Quantile(0.5)), ms(s.UpdateOn.Quantile(0.99)))
	w("| not installed | %d | %s | %s |\n\n", s.UpdateOff.Len(), ms(s.UpdateOff.Quantile(0.5)), ms(s.UpdateOff.Quantile(0.99)))
}
