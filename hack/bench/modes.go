package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/navique/lockguard/hack/bench/measure"
)

// The modes section (issue 13's table, and issue 12's namespace guard at
// 1,000 Locks): the four admission modes on a control plane of each
// version of o.modesVersions.

// modesRun is the modes section on one Kubernetes version.
type modesRun struct {
	version string
	res     *measure.ModesResult
	failure string
}

// modesOptions are the preset of the modes section at o's scale.
func modesOptions(o options) measure.ModesOptions {
	return measure.ModesOptions{
		// Three rounds: each ratio is the median of the rounds' ratios,
		// which for two rounds would be the larger one.
		Ls: []int{0, o.n(100, 10), o.n(1000, 100)}, Rounds: 3, Deletes: o.n(300, 40), Clients: 16, Payload: 1024, LoadRate: 50,
		WindowIterations: o.n(1000, 100), WindowModes: []string{measure.ModeLockguard},
		NamespaceGuardLocks: o.n(1000, 100), NamespaceGuardDeletes: o.n(40, 10),
	}
}

// runModes runs the modes section on each version of o.modesVersions, one
// after the other.
func runModes(ctx context.Context, o options, r *report) error {
	var logs io.Writer
	if o.verbose {
		logs = os.Stderr
	}
	versions := strings.Fields(strings.ReplaceAll(o.modesVersions, ",", " "))
	if r.kubeVersion == "" {
		// No other section started a control plane: the header names these.
		r.kubeVersion = strings.Join(versions, ", v")
	}
	for _, v := range versions {
		run := &modesRun{version: v}
		r.modes = append(r.modes, run)
		if err := runModesOn(ctx, o, v, logs, run); err != nil {
			run.failure = err.Error()
			return fmt.Errorf("modes, Kubernetes %s: %w", v, err)
		}
	}
	return nil
}

func runModesOn(ctx context.Context, o options, version string, logs io.Writer, run *modesRun) error {
	step("Admission modes, Kubernetes %s: starting etcd and kube-apiserver", version)
	c, err := measure.StartClusterWith(ctx, logs, version, measure.APIServerFlagsFor(version))
	if err != nil {
		return err
	}
	defer c.Stop()
	c.LockguardArgs = strings.Fields(o.args)
	progress := func(format string, args ...any) {
		step("Admission modes, Kubernetes %s: %s", version, fmt.Sprintf(format, args...))
	}
	run.res, err = c.BenchModes(ctx, o.lockguard, modesOptions(o), progress)
	return err
}

// modesSummary writes the modes section's targets into the Targets table.
func (r *report) modesSummary(w writer) {
	for _, run := range r.modes {
		d := run.res
		if d == nil {
			continue
		}
		closedLoopTargets(w, d)
		windowTarget(w, d)
	}
}

// modesSection writes section 8.
func (r *report) modesSection(w writer) {
	if len(r.modes) == 0 {
		return
	}
	w("## 8. Admission modes side by side (issues 12 and 13)\n\n")
	w("Issue 13's table, in `make bench`: allowed DELETEs of unlocked Stacks with no admission, the seed's ValidatingAdmissionPolicy (the annotation), the lockguard binary with its default flags and with `--cache-only-decisions` (each its own process, both running throughout, each mode's namespaces selected by its own webhook configuration), in namespaces holding L other Locks (on Stacks that do not exist), under a background write load; modes and L interleaved in the same run. Each version on a control plane of its own, one after the other. The other confirmations issue 13 measured beside these modes, and why the default is what it is: [confirming-read.md](history/confirming-read.md).\n\n")
	for _, run := range r.modes {
		w("### Kubernetes %s\n\n", run.version)
		if run.failure != "" {
			w("**Did not complete:** %s\n\n", run.failure)
		}
		d := run.res
		if d == nil {
			continue
		}
		w("%d clients, closed loop, %d deletes per (mode, L) and round, %d rounds, order of L and modes rotating per round; background load %.0f writes/s achieved (%d failed); policy API: %s; took %s.\n\n",
			d.Options.Clients, d.Options.Deletes, d.Options.Rounds, d.LoadRate, d.LoadErrors, orNone(d.PolicyAPI), d.Took.Round(time.Second))
		closedLoopTable(w, d)
		windowTable(w, d)
		if g := d.NamespaceGuard; g != nil {
			w("Namespace guard (issue 12, [contract.md](contract.md) rule 11), lockguard default flags: server-side dry-run DELETEs of a namespace through the API server, one at a time, the three cases interleaved, %d each (after one warm-up), under the same background load. *Unguarded*: a namespace with no Lock, which the webhook entry's `objectSelector` does not send to lockguard (the baseline). *Denied*: %d Locks, each on an existing Stack. *Allowed*: %d Locks whose targets do not exist (every target is checked, then the API server's Locks confirm).\n\n",
				g.Unguarded.Len(), g.Locks, g.Locks)
			w("| namespace | p50 | p99 | max | p50 ÷ unguarded |\n|---|---|---|---|---|\n")
			for _, k := range []struct {
				name string
				lat  *measure.Latencies
			}{{"unguarded (no Lock)", &g.Unguarded}, {fmt.Sprintf("denied (%d Locks)", g.Locks), &g.Denied}, {fmt.Sprintf("allowed (%d Locks, targets missing)", g.Locks), &g.Allowed}} {
				w("| %s | %s | %s | %s | %.2f |\n", k.name, ms(k.lat.Quantile(0.5)), ms(k.lat.Quantile(0.99)), ms(k.lat.Quantile(1)), ratio(k.lat.Quantile(0.5), g.Unguarded.Quantile(0.5)))
			}
			if g.Wrong > 0 {
				w("\n**%d answers were not the expected ones**; first: `%s`\n", g.Wrong, g.FirstWrong)
			}
			w("\n")
		}
	}
}

// modeTitle names a mode of the modes section in the report.
func modeTitle(m string) string {
	switch m {
	case measure.ModeNone:
		return "no admission"
	case measure.ModePolicy:
		return "seed VAP"
	case measure.ModeLockguard:
		return "lockguard default"
	case measure.ModeLockguardCacheOnly:
		return "lockguard cache-only"
	}
	return m
}

// closedLoopTargets writes issue 13's closed-loop targets of d, per L.
func closedLoopTargets(w writer, d *measure.ModesResult) {
	for _, l := range d.Options.Ls {
		if d.Options.Rounds == 0 {
			break
		}
		p := d.Ratio(measure.ModeLockguard, measure.ModeNone, l, measure.P99Stat)
		t := d.Ratio(measure.ModeLockguard, measure.ModeNone, l, measure.RateStat)
		c := d.Ratio(measure.ModeLockguard, measure.ModeLockguardCacheOnly, l, measure.P99Stat)
		w("| 13 | %s, L=%d: default DELETE p99 ≤ 1.2× no admission | %.2f× | %s |\n", d.Version, l, p, metOrMissed(p > 0 && p <= 1.2))
		w("| 13 | %s, L=%d: default throughput ≥ 0.8× no admission | %.2f× | %s |\n", d.Version, l, t, metOrMissed(t >= 0.8))
		w("| 13 | %s, L=%d: default p99 within 1.1× of cache-only | %.2f× | %s |\n", d.Version, l, c, metOrMissed(c > 0 && c <= 1.1))
	}
}

// windowTarget writes issue 13's protection-window target of d.
func windowTarget(w writer, d *measure.ModesResult) {
	if win := d.Windows[measure.ModeLockguard]; win != nil {
		w("| 13 | %s: protection window (default): deletes that slip through = 0 | %d of %d | %s |\n", d.Version, win.Slipped, win.Iterations, metOrMissed(win.Slipped == 0))
	}
}

// orNone is s, or "not served" when s is empty.
func orNone(s string) string {
	if s == "" {
		return "not served"
	}
	return s
}

// closedLoopTable writes d's closed-loop table: every mode at every L.
func closedLoopTable(w writer, d *measure.ModesResult) {
	var errs []string
	if d.Options.Rounds > 0 {
		w("**Closed loop** (as fast as the clients go: on two shared cores this measures CPU per delete as much as latency):\n\n")
		w("| mode | L | deletes/s (median of rounds) | p50 | p99 | p99 ÷ no admission | rate ÷ no admission | p99 ÷ lockguard cache-only | refused |\n|---|---|---|---|---|---|---|---|---|\n")
	}
	for _, m := range d.Modes {
		if d.Options.Rounds == 0 {
			break
		}
		for _, l := range d.Options.Ls {
			c := d.Cells[m][l]
			w("| %s | %d | %.0f | %s | %s | %.2f | %.2f | %.2f | %d |\n", modeTitle(m), l, c.MedianRate(), ms(c.Latency.Quantile(0.5)), ms(c.Latency.Quantile(0.99)),
				d.Ratio(m, measure.ModeNone, l, measure.P99Stat), d.Ratio(m, measure.ModeNone, l, measure.RateStat), d.Ratio(m, measure.ModeLockguardCacheOnly, l, measure.P99Stat), c.Errors)
			if c.FirstError != "" {
				errs = append(errs, fmt.Sprintf("- %s, L=%d: %d refused; first: `%s`", modeTitle(m), l, c.Errors, c.FirstError))
			}
		}
	}
	if len(errs) > 0 {
		w("\nAllowed deletes that were refused (counted in the latencies):\n\n%s\n", strings.Join(errs, "\n"))
	}
	if d.Options.Rounds > 0 {
		w("\nRatios are the median over rounds of the ratio within a round (same L). p50/p99 pool all rounds.\n\n")
	}
}

// windowTable writes d's protection-window table.
func windowTable(w writer, d *measure.ModesResult) {
	if len(d.WindowModes) > 0 {
		w("Protection window: one client creates a Lock (`protect-<Stack>`) on an existing Stack and deletes the Stack as soon as the create returns; modes interleaved iteration by iteration.\n\n")
		w("| mode | strict by design | iterations | slipped through | denied | refused otherwise | Lock create latency | delete latency |\n|---|---|---|---|---|---|---|---|\n")
		for _, m := range d.WindowModes {
			win := d.Windows[m]
			strict := "yes"
			if m == measure.ModeLockguardCacheOnly {
				strict = "no"
			}
			w("| %s | %s | %d | %d | %d | %d | %s | %s |\n", modeTitle(m), strict, win.Iterations, win.Slipped, win.Denied, win.Errored, win.Create.Summary(), win.Latency.Summary())
		}
		w("\n")
	}
}
