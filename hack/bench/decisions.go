package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/navique/lockguard/e2e/bench"
)

// decisionRun is the issue 13 measurements on one Kubernetes version.
type decisionRun struct {
	version   string
	reads     *bench.ReadsResult
	decisions *decisionsResult
	failure   string
}

// decisionsResult is bench.DecisionsResult, with the report's helpers.
type decisionsResult struct{ *bench.DecisionsResult }

// runDecisions runs the reads and decisions sections on a control plane of
// each version of o.decideVersions, one after the other.
func runDecisions(ctx context.Context, o options, r *report) error {
	var logs io.Writer
	if o.verbose {
		logs = os.Stderr
	}
	versions := strings.Fields(strings.ReplaceAll(o.decideVersions, ",", " "))
	if r.kubeVersion == "" {
		// No other section started a control plane: the header names these.
		r.kubeVersion = strings.Join(versions, ", v")
	}
	for _, v := range versions {
		run := &decisionRun{version: v}
		r.decisions = append(r.decisions, run)
		if err := runDecisionsOn(ctx, o, v, logs, run); err != nil {
			run.failure = err.Error()
			return fmt.Errorf("Kubernetes %s: %w", v, err)
		}
	}
	return nil
}

func runDecisionsOn(ctx context.Context, o options, version string, logs io.Writer, run *decisionRun) error {
	step("Kubernetes %s: starting etcd and kube-apiserver", version)
	c, err := bench.StartClusterWith(ctx, logs, version, bench.APIServerFlagsFor(version))
	if err != nil {
		return err
	}
	defer c.Stop()
	c.LockguardArgs = strings.Fields(o.args)
	progress := func(format string, args ...any) { step("Kubernetes %s: %s", version, fmt.Sprintf(format, args...)) }
	ls := []int{0, o.n(100, 10), o.n(1000, 100)}
	if o.want("reads") {
		progress("confirming reads")
		if run.reads, err = c.BenchReads(ctx, bench.ReadsOptions{
			Ls: ls, Isolated: o.n(40, 10), AfterWrite: o.n(40, 10), Concurrent: o.n(300, 60), Workers: 16, LoadRate: 50, Attribution: 20,
		}, progress); err != nil {
			return fmt.Errorf("reads: %w", err)
		}
	}
	if o.want("decisions") {
		progress("allowed deletes by admission mode")
		var res *bench.DecisionsResult
		do := bench.DecisionOptions{
			Ls: ls, Rounds: o.decideRounds, Deletes: o.n(300, 40), Clients: 16, Payload: 1024, LoadRate: 50,
			WindowIterations: o.n(1000, 100), Candidates: bench.Candidates,
			PacedRounds: o.decideRounds, PacedDeletes: o.n(150, 20), PacedWorkers: 64, PacedRate: 100,
			PacedModes: []string{bench.ModeNone, bench.ModePolicy, bench.ModeLockguard, bench.ModeLockguardCacheOnly,
				bench.CandidateMode(bench.CandCacheOnly), bench.CandidateMode(bench.CandListFields),
				bench.CandidateMode(bench.CandGet), bench.CandidateMode(bench.CandIndex)},
		}
		if o.decideCandidates != "" {
			do.Candidates = strings.Split(o.decideCandidates, ",")
		}
		parts := strings.Split(o.decideParts, ",")
		if !slices.Contains(parts, "closed") {
			do.Rounds = 0
		}
		if !slices.Contains(parts, "paced") {
			do.PacedRounds = 0
		}
		if !slices.Contains(parts, "window") {
			do.WindowIterations = 0
		}
		do.SkipServer = !slices.Contains(parts, "server")
		if res, err = c.BenchDecisions(ctx, o.lockguard, do, progress); err != nil {
			return fmt.Errorf("decisions: %w", err)
		}
		run.decisions = &decisionsResult{res}
	}
	return nil
}

// modeTitle names a decisions mode in the report.
func modeTitle(m string) string {
	switch m {
	case bench.ModeNone:
		return "no admission"
	case bench.ModePolicy:
		return "seed VAP"
	case bench.ModeLockguard:
		return "lockguard default"
	case bench.ModeLockguardCacheOnly:
		return "lockguard cache-only"
	}
	return "candidate " + strings.TrimPrefix(m, "c-")
}

// decisionsSummary writes issue 13's targets into the Targets table.
func (r *report) decisionsSummary(w writer) {
	for _, run := range r.decisions {
		if run.decisions == nil {
			continue
		}
		d := run.decisions.DecisionsResult
		closedLoopTargets(w, d)
		if len(d.PacedModes) > 0 {
			for _, l := range d.Options.Ls {
				p := d.PacedRatio(bench.ModeLockguard, bench.ModeNone, l, 0.99)
				c := d.PacedRatio(bench.ModeLockguard, bench.ModeLockguardCacheOnly, l, 0.99)
				w("| 13 | %s, L=%d, paced: default DELETE p99 ≤ 1.2× no admission | %.2f× | %s |\n", d.Version, l, p, metOrMissed(p > 0 && p <= 1.2))
				w("| 13 | %s, L=%d, paced: default p99 within 1.1× of cache-only | %.2f× | %s |\n", d.Version, l, c, metOrMissed(c > 0 && c <= 1.1))
			}
		}
		windowTarget(w, d)
	}
}

// closedLoopTargets writes issue 13's closed-loop targets of d, per L.
func closedLoopTargets(w writer, d *bench.DecisionsResult) {
	for _, l := range d.Options.Ls {
		if d.Options.Rounds == 0 {
			break
		}
		p := d.Ratio(bench.ModeLockguard, bench.ModeNone, l, bench.P99Stat)
		t := d.Ratio(bench.ModeLockguard, bench.ModeNone, l, bench.RateStat)
		c := d.Ratio(bench.ModeLockguard, bench.ModeLockguardCacheOnly, l, bench.P99Stat)
		w("| 13 | %s, L=%d: default DELETE p99 ≤ 1.2× no admission | %.2f× | %s |\n", d.Version, l, p, metOrMissed(p > 0 && p <= 1.2))
		w("| 13 | %s, L=%d: default throughput ≥ 0.8× no admission | %.2f× | %s |\n", d.Version, l, t, metOrMissed(t >= 0.8))
		w("| 13 | %s, L=%d: default p99 within 1.1× of cache-only | %.2f× | %s |\n", d.Version, l, c, metOrMissed(c > 0 && c <= 1.1))
	}
}

// windowTarget writes issue 13's protection-window target of d.
func windowTarget(w writer, d *bench.DecisionsResult) {
	if win := d.Windows[bench.ModeLockguard]; win != nil {
		w("| 13 | %s: protection window (default): deletes that slip through = 0 | %d of %d | %s |\n", d.Version, win.Slipped, win.Iterations, metOrMissed(win.Slipped == 0))
	}
}

// decisionsSection writes section 7.
func (r *report) decisionsSection(w writer) {
	if len(r.decisions) == 0 {
		return
	}
	w("## 7. Confirming an allowed delete (issue 13)\n\n")
	w("Each Kubernetes version on a control plane of its own, one after the other; within a version every variant is measured in the same run, interleaved. L is the number of other Locks in the namespace of the deleted object (targets that do not exist). A background writer patches ConfigMaps of another namespace throughout (rate below), so that the API server's watch cache of Locks is not trivially fresh.\n\n")
	w("Candidates are served by the bench's own webhook server (`bench.ServeCandidates`, a child process running as lockguard's ServiceAccount with lockguard's client QPS): lockguard's `webhook.Handler` on its `controller.LockIndex`, with only the confirmation of a delete the cache would allow changed. `cache-only` and `list-coalesced` there are the binary's two modes rebuilt in that server (`webhook.NewHandler(index, nil)` and `webhook.NewHandler(index, apiReader)`): the control for its overhead; every other candidate wraps the index so that a lookup the cache would answer with no Lock makes the candidate's read (`bench.CandidateHandler`). `get` reads the Lock named `<kind>.<name>` (lowercase kind) of the target; `list-label` selects on a label `bench.lockguard.navique.com/target=<Kind>.<name>`; `index` is a prototype of a per-target record: the candidate server also validates Lock CREATEs in its namespaces (failurePolicy Fail, sideEffects NoneOnDryRun) and, before allowing one, adds the Lock's name to a ConfigMap `lockindex.<kind>.<name>` of the namespace; it confirms with a GET of that ConfigMap (and of each Lock it names that the cache lacks), so its Locks keep free names; `list-fields` on the Lock CRD's `selectableFields` `.spec.targetRef.kind` and `.spec.targetRef.name`, which the bench adds to the CRD (kept only where the API server serves them). The bench names and labels its Locks that way, which is what a product would have to guarantee.\n\n")
	for _, run := range r.decisions {
		w("### Kubernetes %s\n\n", run.version)
		if run.failure != "" {
			w("**Did not complete:** %s\n\n", run.failure)
		}
		if run.decisions != nil {
			d := run.decisions.DecisionsResult
			w("Allowed deletes: %d clients, closed loop, %d deletes per (mode, L) and round, %d rounds, order of L and modes rotating per round; background load %.0f writes/s achieved (%d failed); selectableFields served: %v; policy API: %s; took %s.\n\n",
				d.Options.Clients, d.Options.Deletes, d.Options.Rounds, d.LoadRate, d.LoadErrors, d.SelectableFields, orNone(d.PolicyAPI), d.Took.Round(time.Second))
			closedLoopTable(w, d)
			if len(d.PacedModes) > 0 {
				w("**Paced, interleaved** (%d rounds; all (mode, L) cells at once, request i going to cell i mod cells, %.0f deletes/s in all on %d clients, %d deletes per cell and round: a load well below saturation, noise hitting every mode alike):\n\n",
					d.Options.PacedRounds, d.Options.PacedRate, d.Options.PacedWorkers, d.Options.PacedDeletes)
				w("| mode | L | p50 | p99 | p50 ÷ no admission | p99 ÷ no admission | p50 ÷ lockguard cache-only | p99 ÷ lockguard cache-only | refused |\n|---|---|---|---|---|---|---|---|---|\n")
				for _, m := range d.PacedModes {
					for _, l := range d.Options.Ls {
						c := d.Cells[m][l]
						w("| %s | %d | %s | %s | %.2f | %.2f | %.2f | %.2f | %d |\n", modeTitle(m), l, ms(c.Paced.Quantile(0.5)), ms(c.Paced.Quantile(0.99)),
							d.PacedRatio(m, bench.ModeNone, l, 0.5), d.PacedRatio(m, bench.ModeNone, l, 0.99),
							d.PacedRatio(m, bench.ModeLockguardCacheOnly, l, 0.5), d.PacedRatio(m, bench.ModeLockguardCacheOnly, l, 0.99), c.PacedErrors)
					}
				}
				w("\nRatios are the median over rounds of the ratio within a round (same L).\n\n")
			}
			windowTable(w, d)
		}
		if s := run.decisions.server(); s != nil {
			w("Webhook server alone (section 2's closed loop: 16 TLS connections posting the review of an unlocked Stack, 3 rounds of 3 s, paths in rotating order) on the candidate server's paths, against a bare Go TLS server with the same certificate:\n\n| path | reviews/s (median) | ÷ bare server (median of rounds) | errors |\n|---|---|---|---|\n")
			w("| bare | %.0f | 1.00 | %d |\n", median(s.RPS["bare"]), s.Errors["bare"])
			for _, p := range s.Paths {
				w("| %s | %.0f | %.3f | %d |\n", p, median(s.RPS[p]), s.Ratio(p), s.Errors[p])
			}
			w("\n")
		}
		if rd := run.reads; rd != nil {
			w("Reads alone, as lockguard's ServiceAccount, of a namespace with L other Locks for a target none protects; background load %.0f writes/s. *Isolated*: one read at a time, 150 ms apart, all (read, L) interleaved, %d each. *After a write*: one at a time, each right after a ConfigMap patch returned (as when deletes, which are writes, are confirmed one after another), interleaved, %d each. *Concurrent*: %d workers closed loop, %d reads per (read, L) in 3 rounds of rotating order.\n\n",
				rd.LoadRate, rd.Options.Isolated, rd.Options.AfterWrite, rd.Options.Workers, rd.Options.Concurrent)
			w("| read | consistent | L | isolated p50 | isolated p99 | after a write p50 | after a write p99 | concurrent p50 | concurrent p99 | concurrent reads/s |\n|---|---|---|---|---|---|---|---|---|---|\n")
			for _, rr := range rd.Reads {
				for _, l := range rd.Options.Ls {
					iso, aw, con := rd.Isolated[rr][l], rd.AfterWrite[rr][l], rd.Concurrent[rr][l]
					w("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %.0f |\n", rr, yesNo(bench.ConsistentRead(rr)), l,
						ms(iso.Quantile(0.5)), ms(iso.Quantile(0.99)), ms(aw.Quantile(0.5)), ms(aw.Quantile(0.99)), ms(con.Quantile(0.5)), ms(con.Quantile(0.99)), rd.ConcurrentRate[rr][l])
				}
			}
			if len(rd.Attribution) > 0 {
				w("\nWhere each read is served (%d reads alone at L=%d, each right after a write; the API server's Lock metrics that moved, per read):\n\n| read | per read |\n|---|---|\n", rd.Options.Attribution, rd.Options.Ls[len(rd.Options.Ls)/2])
				for _, rr := range rd.Reads {
					w("| %s | %s |\n", rr, rd.Attribution[rr])
				}
			}
			w("\n")
		}
	}
}

// server returns the candidate server's webhook-server result, if any.
func (d *decisionsResult) server() *bench.ServerRatios {
	if d == nil {
		return nil
	}
	return d.Server
}

// median returns the median of xs (a copy is sorted).
func median(xs []float64) float64 {
	ys := slices.Clone(xs)
	slices.Sort(ys)
	if len(ys) == 0 {
		return 0
	}
	return ys[len(ys)/2]
}

func orNone(s string) string {
	if s == "" {
		return "not served"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// closedLoopTable writes d's closed-loop table: every mode at every L.
func closedLoopTable(w writer, d *bench.DecisionsResult) {
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
				d.Ratio(m, bench.ModeNone, l, bench.P99Stat), d.Ratio(m, bench.ModeNone, l, bench.RateStat), d.Ratio(m, bench.ModeLockguardCacheOnly, l, bench.P99Stat), c.Errors)
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
func windowTable(w writer, d *bench.DecisionsResult) {
	if len(d.WindowModes) > 0 {
		w("Protection window: one client creates a Lock (named and labelled as its mode needs: `protect-<Stack>`, or `<kind>.<name>` for the candidates that read by name) on an existing Stack and deletes the Stack as soon as the create returns; modes interleaved iteration by iteration.\n\n")
		w("| mode | strict by design | iterations | slipped through | denied | refused otherwise | Lock create latency | delete latency |\n|---|---|---|---|---|---|---|---|\n")
		for _, m := range d.WindowModes {
			win := d.Windows[m]
			strict := "yes"
			if m == bench.ModeLockguardCacheOnly || (strings.HasPrefix(m, "c-") && !bench.StrictCandidate(strings.TrimPrefix(m, "c-"))) {
				strict = "no"
			}
			w("| %s | %s | %d | %d | %d | %d | %s | %s |\n", modeTitle(m), strict, win.Iterations, win.Slipped, win.Denied, win.Errored, win.Create.Summary(), win.Latency.Summary())
		}
		w("\n")
	}
}
