package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/hack/bench/measure"
)

// envScaleWorstLimit is the container memory limit of the scale section's
// worst case (lockguard again at the last size, its transport held at its
// bounds): by default the chart's (chartLimitMemory); "off" skips it; any
// other value a Kubernetes quantity.
const envScaleWorstLimit = "BENCH_SCALE_WORST_LIMIT"

// envScaleWorstBaseline is another lockguard binary (an earlier
// commit's) whose worst case is measured too, just before ("": none).
const envScaleWorstBaseline = "BENCH_SCALE_WORST_BASELINE"

// envScaleWorstEvery set to 1 runs the worst case at every size with
// Locks, not only the last.
const envScaleWorstEvery = "BENCH_SCALE_WORST_EVERY"

// worstLimit reads envScaleWorstLimit, in bytes (0: off).
func worstLimit(ctx context.Context) (int64, error) {
	v := os.Getenv(envScaleWorstLimit)
	switch v {
	case "off":
		return 0, nil
	case "":
		var err error
		if v, err = chartLimitMemory(ctx); err != nil {
			return 0, err
		}
	}
	q, err := resource.ParseQuantity(v)
	if err != nil || q.Value() <= 0 {
		return 0, fmt.Errorf("%s=%q: want a memory quantity, or off", envScaleWorstLimit, v)
	}
	return q.Value(), nil
}

// chartLimitMemory is the chart's default resources.limits.memory, as its
// Deployment renders it.
func chartLimitMemory(ctx context.Context) (string, error) {
	objs, err := framework.Render(ctx, framework.Release{})
	if err != nil {
		return "", fmt.Errorf("rendering the chart for its memory limit (or set %s): %w", envScaleWorstLimit, err)
	}
	if d := framework.Find(objs, "Deployment", "lockguard"); d != nil {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			if v, ok, _ := unstructured.NestedString(c.(map[string]any), "resources", "limits", "memory"); ok && v != "" {
				return v, nil
			}
		}
	}
	return "", fmt.Errorf("the chart's Deployment sets no memory limit (set %s)", envScaleWorstLimit)
}

// worstTarget is issue 38's last item, as the Targets table names it.
const worstTarget = "the worst case at 100k Locks and 1M objects fits the chart's default limit"

// worstFits says whether w fits its limit: run under it, never killed,
// alive to the end, its first pass over under the load (its caches
// whole), no locked delete allowed.
func worstFits(w *measure.WorstCase) bool {
	return !strings.HasPrefix(w.Cgroup, "no ") && w.OOMKills == 0 && w.Exited == nil && w.FirstPass > 0 && w.Wrong == 0 && w.Peak <= w.Limit
}

// worstSummary writes the worst case's row of the Targets table.
func (r *report) worstSummary(w writer) {
	if r.scale == nil || r.worstLimit == 0 {
		return
	}
	var last *measure.ScalePoint
	for _, p := range r.scale.Points {
		if p.Worst != nil {
			last = p
		}
	}
	if last != nil {
		if last.Locks < scaleTargetLocks || last.Objects < scaleTargetObjects {
			w("| 9 | %s | run at %d Locks and %d objects only (BENCH_SCALE_POINTS) | **missed** |\n", worstTarget, last.Locks, last.Objects)
			return
		}
		w("| 9 | %s | %s | %s |\n", worstTarget, worstLine(last.Worst), metOrMissed(worstFits(last.Worst)))
		return
	}
	w("| 9 | %s | not measured: the run did not reach its last size | **missed** |\n", worstTarget)
}

// worstLine is w in one line.
func worstLine(wc *measure.WorstCase) string {
	s := fmt.Sprintf("under a %s limit (%s): peak charged %s (largest sample every 100 ms %s: anonymous %s, files' pages %s, kernel %s), anonymous RSS peak %s, %d OOM kills",
		mib(wc.Limit), wc.Cgroup, mib(wc.Peak), mib(wc.AtPeak.Usage), mib(wc.AtPeak.Anon), mib(wc.AtPeak.File), mib(wc.AtPeak.Kernel), mib(wc.PeakAnon), wc.OOMKills)
	switch {
	case wc.Exited != nil:
		s += ", **exited before the end**"
	case wc.FirstPass == 0:
		s += fmt.Sprintf(", its first pass **not over** under the load after %s", wc.Held.Round(time.Second))
	default:
		s += fmt.Sprintf(", its first pass over under the load %s after ready", wc.FirstPass.Round(time.Second))
	}
	return s + fmt.Sprintf("; during the load, deletes of locked Stacks denied %d, allowed %d; of an unlocked one allowed %d; failed (fail closed) %d", wc.Denied, wc.Wrong, wc.Allowed, wc.Failed)
}

// worstSection writes the worst case under the scale section's table.
func (r *report) worstSection(w writer) {
	if r.scale == nil || r.worstLimit == 0 {
		return
	}
	for _, p := range r.scale.Points {
		wc := p.Worst
		if wc == nil {
			continue
		}
		limitFrom := "the chart's default; " + envScaleWorstLimit + " sets another, `off` none"
		if v := os.Getenv(envScaleWorstLimit); v != "" {
			limitFrom = envScaleWorstLimit + "=" + v
		}
		w("\n**Worst case** (%s): lockguard once more at %d Locks and %d unlocked objects, with the same flags and `GOMEMLIMIT`, in a memory cgroup of its own limited to %s without swap, as a container's limit (%s; the kernel charges it the process's anonymous memory, the pages of the files it reads and its kernel memory, and kills it when it cannot reclaim under the limit). From the moment it is ready until its first pass over every object is over (its Lock controller's successful passes at least its Locks, its queue empty) and the first run's time to ready and idle and 30 s have passed, %s at most (three times that, and a minute): here %s, a client without credentials holds its transport at the bounds: %d connections from 127.0.0.5 each sending a body of %d bytes but its last byte, and %d from 127.0.0.3 and 127.0.0.4 each sending %d KiB of a header and stalling, each opened again %s after lockguard closes it (%d bodies and %d headers sent); every 2 s meanwhile a server-side dry-run DELETE of each probe above. Ready in %s; %s.\n",
			limitFrom, wc.Locks, wc.Objects, mib(wc.Limit), wc.Cgroup, measure.WorstMaxHold(measure.WorstHold(p)).Round(time.Second), wc.Held.Round(time.Second),
			measure.WorstBodies, measure.WorstBodyLength, measure.WorstHeaders, measure.WorstHeaderBytes>>10, measure.WorstPause, wc.Bodies, wc.Headers,
			wc.Ready.Round(time.Millisecond), worstLine(wc))
		queued := "not read"
		if wc.Passes != nil {
			queued = fmt.Sprintf("%.0f", wc.Queued)
		}
		w("\nRefused by lockguard during the load (`lockguard_webhook_requests_refused_total`): %s; connections closed (`lockguard_webhook_connections_closed_total`): %s. Its Lock controller's passes at the end (`controller_runtime_reconcile_total` by result): %s; in its queue: %s.\n",
			reasons(wc.Refused), reasons(wc.Closed), reasons(wc.Passes), queued)
		if b := p.WorstBaseline; b != nil {
			w("\nThe same, just before, for `%s` (%s): ready in %s; %s. Refused: %s; connections closed: %s.\n", os.Getenv(envScaleWorstBaseline), envScaleWorstBaseline,
				b.Ready.Round(time.Millisecond), worstLine(b), reasons(b.Refused), reasons(b.Closed))
		}
	}
}

// reasons writes counts by reason, sorted ("not read" for nil).
func reasons(m map[string]float64) string {
	if m == nil {
		return "not read (lockguard had exited)"
	}
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]))
	}
	return strings.Join(parts, ", ")
}
