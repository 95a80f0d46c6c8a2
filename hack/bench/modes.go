package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/navique/lockguard/e2e/bench"
)

// The modes section (issue 13's table, and issue 12's namespace guard at
// 1,000 Locks) is part of make bench: the four admission modes only (no
// candidate confirmation, no paced variant, no candidate server), on a
// control plane of each version of o.modesVersions.

// modesOptions are the preset of the modes section at o's scale.
func modesOptions(o options) bench.DecisionOptions {
	return bench.DecisionOptions{
		// Three rounds: each ratio is the median of the rounds' ratios,
		// which for two rounds would be the larger one.
		Ls: []int{0, o.n(100, 10), o.n(1000, 100)}, Rounds: 3, Deletes: o.n(300, 40), Clients: 16, Payload: 1024, LoadRate: 50,
		WindowIterations: o.n(1000, 100), WindowModes: []string{bench.ModeLockguard},
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
		run := &decisionRun{version: v}
		r.modes = append(r.modes, run)
		if err := runModesOn(ctx, o, v, logs, run); err != nil {
			run.failure = err.Error()
			return fmt.Errorf("modes, Kubernetes %s: %w", v, err)
		}
	}
	return nil
}

func runModesOn(ctx context.Context, o options, version string, logs io.Writer, run *decisionRun) error {
	step("Admission modes, Kubernetes %s: starting etcd and kube-apiserver", version)
	c, err := bench.StartClusterWith(ctx, logs, version, bench.APIServerFlagsFor(version))
	if err != nil {
		return err
	}
	defer c.Stop()
	c.LockguardArgs = strings.Fields(o.args)
	progress := func(format string, args ...any) {
		step("Admission modes, Kubernetes %s: %s", version, fmt.Sprintf(format, args...))
	}
	res, err := c.BenchDecisions(ctx, o.lockguard, modesOptions(o), progress)
	if err != nil {
		return err
	}
	run.decisions = &decisionsResult{res}
	return nil
}

// modesSummary writes the modes section's targets into the Targets table.
func (r *report) modesSummary(w writer) {
	for _, run := range r.modes {
		if run.decisions == nil {
			continue
		}
		d := run.decisions.DecisionsResult
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
	w("Issue 13's table, in `make bench`: allowed DELETEs of unlocked Stacks with no admission, the seed's ValidatingAdmissionPolicy (the annotation), the lockguard binary with its default flags and with `--cache-only-decisions` (each its own process, both running throughout, each mode's namespaces selected by its own webhook configuration), in namespaces holding L other Locks (on Stacks that do not exist), under a background write load; modes and L interleaved in the same run. Each version on a control plane of its own, one after the other. `make bench-decisions` adds the candidate confirmations, a paced variant and the candidate server (about 25 minutes per version).\n\n")
	for _, run := range r.modes {
		w("### Kubernetes %s\n\n", run.version)
		if run.failure != "" {
			w("**Did not complete:** %s\n\n", run.failure)
		}
		if run.decisions == nil {
			continue
		}
		d := run.decisions.DecisionsResult
		w("%d clients, closed loop, %d deletes per (mode, L) and round, %d rounds, order of L and modes rotating per round; background load %.0f writes/s achieved (%d failed); policy API: %s; took %s.\n\n",
			d.Options.Clients, d.Options.Deletes, d.Options.Rounds, d.LoadRate, d.LoadErrors, orNone(d.PolicyAPI), d.Took.Round(time.Second))
		closedLoopTable(w, d)
		windowTable(w, d)
		if g := d.NamespaceGuard; g != nil {
			w("Namespace guard (issue 12, LOCK-SPEC rule 11), lockguard default flags: server-side dry-run DELETEs of a namespace through the API server, one at a time, the three cases interleaved, %d each (after one warm-up), under the same background load. *Unguarded*: a namespace with no Lock, which the webhook entry's `objectSelector` does not send to lockguard (the baseline). *Denied*: %d Locks, each on an existing Stack. *Allowed*: %d Locks whose targets do not exist (every target is checked, then the API server's Locks confirm).\n\n",
				g.Unguarded.Len(), g.Locks, g.Locks)
			w("| namespace | p50 | p99 | max | p50 ÷ unguarded |\n|---|---|---|---|---|\n")
			for _, k := range []struct {
				name string
				lat  *bench.Latencies
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
