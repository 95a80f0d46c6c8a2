package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/hack/bench/measure"
)

// The scale section's sizes (issue 38), from the environment, small by
// default so that a smoke run (`-only scale`) takes under a minute.
const (
	// envScalePoints lists the sizes, "<Locks>/<unlocked objects>",
	// comma-separated, each a superset of the one before.
	envScalePoints = "BENCH_SCALE_POINTS"
	// envScaleNamespaces is how many namespaces they are spread over.
	envScaleNamespaces = "BENCH_SCALE_NAMESPACES"
	// envScaleProbes is how many dry-run DELETEs of each kind a size times.
	envScaleProbes = "BENCH_SCALE_PROBES"
	// envScaleGoMemLimit is the GOMEMLIMIT lockguard runs with: by
	// default the chart's (chartGoMemLimit), as users run it; "off" for
	// none; any other value as Go reads it.
	envScaleGoMemLimit = "BENCH_SCALE_GOMEMLIMIT"
	// envScaleGoDebug is the GODEBUG lockguard runs with ("": none), for
	// diagnosis: gctrace=1 writes each collection's heap sizes to its log.
	envScaleGoDebug = "BENCH_SCALE_GODEBUG"
	// envScaleStackWatchCache set to "off" runs kube-apiserver without a
	// watch cache of Stacks (--watch-cache-sizes=stacks.core.navique.com#0):
	// it then lists them from etcd, page by page, rather than holding each
	// as a decoded object (about 14 KiB apiece on this machine), so that a
	// million of them fit beside the Locks. lockguard's informers list and
	// watch the same objects either way. It also stops kube-apiserver's
	// compaction of etcd (--etcd-compaction-interval=0): a list from etcd
	// that outlasts two compactions (5 minutes apart) is refused at its
	// next page (410) and starts again, and under the worst case's load on
	// this machine a list of a million Stacks took that long, again and
	// again (2026-12-07 14:14-14:29), where an API server with its watch
	// cache serves it from memory.
	envScaleStackWatchCache = "BENCH_SCALE_STACK_WATCH_CACHE"

	defaultScalePoints     = "0/0,500/0,500/5000"
	defaultScaleNamespaces = 50
	defaultScaleProbes     = 10
)

// scaleOptions reads the scale section's sizes from the environment.
func scaleOptions() (measure.ScaleOptions, error) {
	o := measure.ScaleOptions{Namespaces: defaultScaleNamespaces, Probes: defaultScaleProbes, Within: 30 * time.Minute, Step: step}
	points := defaultScalePoints
	if v := os.Getenv(envScalePoints); v != "" {
		points = v
	}
	var prev measure.ScaleSize
	for _, p := range strings.Split(points, ",") {
		l, ob, ok := strings.Cut(strings.TrimSpace(p), "/")
		locks, err1 := strconv.Atoi(l)
		objects, err2 := strconv.Atoi(ob)
		if !ok || err1 != nil || err2 != nil || locks < prev.Locks || objects < prev.Objects {
			return o, fmt.Errorf("%s=%q: want <Locks>/<objects>,…, each size at least the one before", envScalePoints, points)
		}
		prev = measure.ScaleSize{Locks: locks, Objects: objects}
		o.Points = append(o.Points, prev)
	}
	for env, into := range map[string]*int{envScaleNamespaces: &o.Namespaces, envScaleProbes: &o.Probes} {
		if v := os.Getenv(env); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return o, fmt.Errorf("%s=%q is not a positive integer", env, v)
			}
			*into = n
		}
	}
	return o, nil
}

// runScale measures lockguard's memory, start-up and DELETE decisions at
// each size of scaleOptions, on a control plane of its own whose etcd may
// hold a few GiB.
func runScale(ctx context.Context, o options, r *report) error {
	so, err := scaleOptions()
	if err != nil {
		return err
	}
	var logs io.Writer
	if o.verbose {
		logs = os.Stderr
	}
	step("Scale: starting etcd and kube-apiserver")
	fo := framework.Options{Logs: logs, EtcdFlags: map[string]string{"quota-backend-bytes": strconv.Itoa(8 << 30)}}
	switch v := os.Getenv(envScaleStackWatchCache); v {
	case "", "on":
	case "off":
		fo.APIServerFlags = map[string]string{"watch-cache-sizes": "stacks." + lockv1alpha1.GroupVersion.Group + "#0", "etcd-compaction-interval": "0"}
		r.scaleNoStackWatchCache = true
	default:
		return fmt.Errorf("%s=%q: want on or off", envScaleStackWatchCache, v)
	}
	c, err := measure.StartClusterOptions(ctx, fo)
	if err != nil {
		return err
	}
	defer c.Stop()
	c.LockguardArgs = strings.Fields(o.args)
	switch v := os.Getenv(envScaleGoMemLimit); v {
	case "off":
		r.scaleGoMemLimit = "off"
	case "":
		if v, err = chartGoMemLimit(ctx); err != nil {
			return err
		}
		c.LockguardEnv = []string{"GOMEMLIMIT=" + v}
		r.scaleGoMemLimit, r.scaleChartGoMemLimit = v, true
	default:
		c.LockguardEnv = []string{"GOMEMLIMIT=" + v}
		r.scaleGoMemLimit = v
	}
	if v := os.Getenv(envScaleGoDebug); v != "" {
		c.LockguardEnv = append(c.LockguardEnv, "GODEBUG="+v)
		r.scaleGoDebug = v
	}
	if so.WorstLimit, err = worstLimit(ctx); err != nil {
		return err
	}
	r.worstLimit = so.WorstLimit
	so.WorstBaseline, so.WorstEvery = os.Getenv(envScaleWorstBaseline), os.Getenv(envScaleWorstEvery) == "1"
	so.Baseline = o.baseline
	so.Profiles = filepath.Join(filepath.Dir(o.out), "scale-profiles")
	r.scale, err = c.MeasureScale(ctx, o.lockguard, so)
	if r.scale != nil && len(r.scale.Points) > 0 {
		// The sizes measured, also when a later one failed; next to the
		// report, which links it by its name.
		svg := strings.TrimSuffix(o.out, ".md") + "-scale.svg"
		werr := os.MkdirAll(filepath.Dir(svg), 0o755)
		if werr == nil {
			werr = os.WriteFile(svg, []byte(scaleSVG(r.scale)), 0o644)
		}
		if werr != nil && err == nil {
			err = werr
		} else if werr == nil {
			r.scaleSVG = svg
		}
	}
	if err != nil {
		return fmt.Errorf("scale: %w", err)
	}
	return nil
}

// scaleBaseline writes the scale section's side-by-side table: at each
// size the -baseline binary, then -lockguard, and their heap per Lock and
// per unlocked object.
func (r *report) scaleBaseline(w writer) {
	s := r.scale
	w("\nSide by side at each size: `%s` (-baseline), started just before `%s` (-lockguard), on the same API server; ready, RSS, heap in use (smallest sample in brackets) and the live heap (`go_memstats_heap_alloc_bytes` right after a collection forced through `/debug/pprof/heap?gc=1`, once the samples are taken), and the ratio of live heaps, lockguard / baseline:\n\n", s.Options.Baseline, r.opts.lockguard)
	w("| Locks | unlocked objects | baseline ready | baseline RSS, anonymous (peak) | baseline heap in use | baseline live heap | lockguard ready | lockguard RSS, anonymous (peak) | lockguard heap in use | lockguard live heap | live ratio |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range s.Points {
		b, m := p.Baseline, p.Memory
		w("| %d | %d | %s | %s, %s (%s) | %s (%s) | %s | %s | %s, %s (%s) | %s (%s) | %s | %.2f× |\n", p.Locks, p.Objects,
			b.Ready.Round(time.Millisecond), mib(b.RSS), mib(b.RSSAnon), mib(b.PeakAnon), mib(b.HeapInuse), mib(b.HeapMin), mib(b.Live),
			m.Ready.Round(time.Millisecond), mib(m.RSS), mib(m.RSSAnon), mib(m.PeakAnon), mib(m.HeapInuse), mib(m.HeapMin), mib(m.Live), float64(m.Live)/float64(b.Live))
	}
	w("\n")
	for i := 1; i < len(s.Points); i++ {
		for j := range i {
			a, b := s.Points[j], s.Points[i]
			for _, per := range []struct {
				of   func(a, b *measure.ScalePoint, pick func(*measure.ScalePoint) *measure.MemoryPoint, fig func(*measure.MemoryPoint) int64) (float64, bool)
				what string
				from int
				to   int
				unit string
			}{{measure.PerLock, "per Lock and its Stack", a.Locks, b.Locks, "Locks"}, {measure.PerObject, "per unlocked object", a.Objects, b.Objects, "objects"}} {
				v, ok := per.of(a, b, measure.Baselined, measure.HeapInuse)
				if !ok {
					continue
				}
				c, _ := per.of(a, b, measure.Measured, measure.HeapInuse)
				lb, _ := per.of(a, b, measure.Baselined, measure.LiveHeap)
				lc, _ := per.of(a, b, measure.Measured, measure.LiveHeap)
				w("- %s, %d → %d %s: heap in use, baseline **%.0f** bytes, lockguard **%.0f** (%.2f×); live heap, baseline **%.0f**, lockguard **%.0f** (%.2f×)\n", per.what, per.from, per.to, per.unit, v, c, c/v, lb, lc, lc/lb)
			}
		}
	}
}

// scaleSection writes the scale section (issue 38).
func (r *report) scaleSection(w writer) {
	s := r.scale
	if s == nil {
		return
	}
	o := s.Options
	w("## 9. Scale: Locks and unlocked objects (issue 38)\n\n")
	w("A control plane of its own. At each size the Locks (half by `targetRef`, half by `selector`, each covering one Stack of its own) and the Stacks no Lock covers (one in ten owns the next nine, by ownerReference, in its namespace) are spread round robin over %d namespaces (the unlocked ones by tens). They are written **straight into etcd** (JSON, as kube-apiserver stores custom resources, in transactions of 128 through etcd's gRPC gateway) while kube-apiserver is stopped, then kube-apiserver starts again (its start is timed until it serves the Locks and Stacks from its watch caches, as a running API server does); the namespaces are created through the API server. Each object is a copy of a template object created through the API server and converged by lockguard in the same run (%d bytes in etcd per unlocked Stack, %d per Lock with its Stack, managedFields included), so that lockguard finds them as it leaves them. The template namespace (2 Locks, 4 Stacks) exists at every size.\n\n", o.Namespaces, s.ObjectBytes, s.LockBytes)
	w("The lockguard binary with its default flags, leading, as in section 4: leader election timed as the binary's defaults (15 s lease, 10 s renew deadline; the other sections shorten it): ready is the time from its start to `/readyz` answering 200; once it leads and then is idle (its reconciler's first pass over every object done), RSS and `go_memstats_heap_inuse_bytes` (medians of 10 samples; the smallest heap sample in brackets), then the live heap (`go_memstats_heap_alloc_bytes` right after a collection forced through lockguard's Go profiler on a loopback port, `/debug/pprof/heap?gc=1`, whose heap profile is kept in scale-profiles/ next to the report), and the peak RSS from its start (`VmHWM`: the initial lists and reconciliation); beside the RSS, its anonymous part (`RssAnon`: less the pages of files, the binary's mostly, which a container's memory limit reclaims before it kills) once idle and its largest sample from the start (every 250 ms). A run fails if lockguard no longer leads when sampled. DELETE decisions: %d server-side dry-run DELETEs of each kind through kube-apiserver and lockguard's webhook, interleaved, once lockguard is warm: a Stack a targetRef Lock covers and one a selector Lock covers (denied) and an unlocked Stack that owns nothing (allowed, after the namespace's Locks are confirmed with the API server).\n\n", o.Probes)
	w("| Locks | unlocked objects | written into etcd | kube-apiserver start | lockguard ready | idle after | peak RSS | RSS | anonymous RSS (peak) | heap in use | live heap | denied (targetRef) p50 / p99 | denied (selector) p50 / p99 | allowed p50 / p99 |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range s.Points {
		m := p.Memory
		w("| %d | %d | %s | %s | %s | %s | %s | %s | %s (%s) | %s (%s) | %s | %s / %s | %s / %s | %s / %s |\n", p.Locks, p.Objects,
			p.Seeded.Round(100*time.Millisecond), p.APIServer.Round(100*time.Millisecond), m.Ready.Round(time.Millisecond), m.Settled.Round(time.Second),
			mib(m.PeakRSS), mib(m.RSS), mib(m.RSSAnon), mib(m.PeakAnon), mib(m.HeapInuse), mib(m.HeapMin), mib(m.Live),
			ms(p.TargetRef.Quantile(0.5)), ms(p.TargetRef.Quantile(0.99)), ms(p.Selector.Quantile(0.5)), ms(p.Selector.Quantile(0.99)),
			ms(p.Allowed.Quantile(0.5)), ms(p.Allowed.Quantile(0.99)))
	}
	if r.scaleNoStackWatchCache {
		w("\nkube-apiserver ran without a watch cache of Stacks (%s=off: `--watch-cache-sizes=stacks.%s#0`), so that it could hold the objects: it lists Stacks from etcd page by page (its start is then timed until a list of each kind answers), and lockguard's informers list and watch them as on any API server. It did not compact etcd (`--etcd-compaction-interval=0`): a list from etcd that outlasts two compactions starts again, which the worst case's load made endless.\n", envScaleStackWatchCache, lockv1alpha1.GroupVersion.Group)
	}
	switch {
	case r.scaleGoMemLimit == "off":
		w("\nEvery lockguard ran without `GOMEMLIMIT` (%s=off), where the chart sets one.\n", envScaleGoMemLimit)
	case r.scaleChartGoMemLimit:
		w("\nEvery lockguard ran with `GOMEMLIMIT=%s`, as the chart runs it (90%% of its default `resources.limits.memory`; %s sets another, `off` none).\n", r.scaleGoMemLimit, envScaleGoMemLimit)
	case r.scaleGoMemLimit != "":
		w("\nEvery lockguard ran with `GOMEMLIMIT=%s` (%s).\n", r.scaleGoMemLimit, envScaleGoMemLimit)
	}
	if r.scaleGoDebug != "" {
		w("\nEvery lockguard ran with `GODEBUG=%s` (%s): its log has what that writes.\n", r.scaleGoDebug, envScaleGoDebug)
	}
	r.worstSection(w)
	if len(s.Points) > 0 && s.Points[0].Baseline != nil {
		r.scaleBaseline(w)
	}
	w("\nHeap in use between sizes that differ in one count only:\n\n")
	for i := 1; i < len(s.Points); i++ {
		for j := range i {
			a, b := s.Points[j], s.Points[i]
			if v, ok := measure.PerLock(a, b, measure.Measured, measure.HeapInuse); ok {
				w("- per Lock and its Stack, %d → %d Locks (%d unlocked objects): **%.0f bytes**\n", a.Locks, b.Locks, a.Objects, v)
			}
			if v, ok := measure.PerObject(a, b, measure.Measured, measure.HeapInuse); ok {
				w("- per unlocked object, %d → %d objects (%d Locks): **%.0f bytes**\n", a.Objects, b.Objects, a.Locks, v)
			}
			if v, ok := measure.PerLock(a, b, measure.Measured, measure.LiveHeap); ok {
				w("- live heap per Lock and its Stack, %d → %d Locks: **%.0f bytes**\n", a.Locks, b.Locks, v)
			}
			if v, ok := measure.PerObject(a, b, measure.Measured, measure.LiveHeap); ok {
				w("- live heap per unlocked object, %d → %d objects: **%.0f bytes**\n", a.Objects, b.Objects, v)
			}
		}
	}
	// A size that differs from the one before in both counts, against
	// what the per-object figures measured before it predict.
	var perLock, perObject float64
	var haveLock, haveObject bool
	for i := 1; i < len(s.Points); i++ {
		a, b := s.Points[i-1], s.Points[i]
		if v, ok := measure.PerLock(a, b, measure.Measured, measure.HeapInuse); ok {
			perLock, haveLock = v, true
		} else if v, ok := measure.PerObject(a, b, measure.Measured, measure.HeapInuse); ok {
			perObject, haveObject = v, true
		} else if haveLock && haveObject && a.Locks != b.Locks && a.Objects != b.Objects {
			want := float64(a.Memory.HeapInuse) + perLock*float64(b.Locks-a.Locks) + perObject*float64(b.Objects-a.Objects)
			w("- %d Locks and %d unlocked objects, from %d and %d with the figures above: heap in use %s predicted, %s measured (%.2f×)\n",
				b.Locks, b.Objects, a.Locks, a.Objects, mib(int64(want)), mib(b.Memory.HeapInuse), float64(b.Memory.HeapInuse)/want)
		}
	}
	if r.scaleSVG != "" {
		w("\n![lockguard's memory against the objects in the cluster](%s)\n", filepath.Base(r.scaleSVG))
	}
	w("\n")
}

// chartGoMemLimit returns the GOMEMLIMIT the chart's Deployment sets with
// its default values (90% of resources.limits.memory, in bytes), read
// from the chart as helm renders it.
func chartGoMemLimit(ctx context.Context) (string, error) {
	objs, err := framework.Render(ctx, framework.Release{})
	if err != nil {
		return "", fmt.Errorf("rendering the chart for its GOMEMLIMIT (or set %s): %w", envScaleGoMemLimit, err)
	}
	d := framework.Find(objs, "Deployment", "lockguard")
	if d == nil {
		return "", fmt.Errorf("the rendered chart has no Deployment lockguard (set %s)", envScaleGoMemLimit)
	}
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	for _, c := range containers {
		env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
		for _, e := range env {
			if e, _ := e.(map[string]any); e["name"] == "GOMEMLIMIT" {
				if v, ok := e["value"].(string); ok && v != "" {
					return v, nil
				}
			}
		}
	}
	return "", fmt.Errorf("the chart's Deployment sets no GOMEMLIMIT (set %s)", envScaleGoMemLimit)
}

// Issue 38's targets, judged on the scale section's points.
const (
	scaleTargetLocks, scaleTargetObjects = 100_000, 1_000_000
	scaleTargetRSS                       = 256 << 20 // the chart's default memory limit
	scaleTargetPerLock                   = 1024      // bytes of live heap per Lock and its Stack
	scaleTargetPerObject                 = 150       // bytes of live heap per unlocked object
	scaleTargetReady                     = 5 * time.Second
)

// scaleSummary writes issue 38's targets into the Targets table, from
// the scale section's points: RSS once idle at the largest size with at
// least 100,000 Locks and a million unlocked objects, the live heap per
// Lock and per unlocked object between sizes that differ in that count
// alone (the widest such step), and ready at 100,000 Locks or more. A
// target whose size the run did not reach says so.
func (r *report) scaleSummary(w writer) {
	if r.scale == nil {
		return
	}
	pts := r.scale.Points
	notReached := func(what string) {
		w("| 9 | %s | not measured: the run's sizes (BENCH_SCALE_POINTS) did not reach it | **missed** |\n", what)
	}
	var top *measure.ScalePoint
	for _, p := range pts {
		if p.Locks >= scaleTargetLocks && p.Objects >= scaleTargetObjects && p.Memory != nil {
			top = p
		}
	}
	const rssTarget = "≤ 256 Mi RSS with 100k Locks and 1M unlocked objects"
	if top == nil {
		notReached(rssTarget)
	} else {
		w("| 9 | %s | %s once idle (anonymous %s; peak %s) at %d Locks and %d unlocked objects | %s |\n", rssTarget,
			mib(top.Memory.RSS), mib(top.Memory.RSSAnon), mib(top.Memory.PeakRSS), top.Locks, top.Objects, metOrMissed(top.Memory.RSS <= scaleTargetRSS))
	}
	widest := func(per func(a, b *measure.ScalePoint, pick func(*measure.ScalePoint) *measure.MemoryPoint, fig func(*measure.MemoryPoint) int64) (float64, bool), count func(*measure.ScalePoint) int) (v float64, a, b *measure.ScalePoint) {
		for i := range pts {
			for j := i + 1; j < len(pts); j++ {
				if x, ok := per(pts[i], pts[j], measure.Measured, measure.LiveHeap); ok && (b == nil || count(pts[j])-count(pts[i]) > count(b)-count(a)) {
					v, a, b = x, pts[i], pts[j]
				}
			}
		}
		return v, a, b
	}
	const lockTarget, objectTarget = "≤ 1 KiB of heap per Lock and target", "≤ 150 bytes per unlocked object"
	if v, a, b := widest(measure.PerLock, func(p *measure.ScalePoint) int { return p.Locks }); b == nil {
		notReached(lockTarget)
	} else {
		w("| 9 | %s | %.0f bytes of live heap per Lock and its Stack, %d → %d Locks | %s |\n", lockTarget, v, a.Locks, b.Locks, metOrMissed(v <= scaleTargetPerLock))
	}
	if v, a, b := widest(measure.PerObject, func(p *measure.ScalePoint) int { return p.Objects }); b == nil {
		notReached(objectTarget)
	} else {
		w("| 9 | %s | %.0f bytes of live heap per unlocked object, %d → %d objects | %s |\n", objectTarget, v, a.Objects, b.Objects, metOrMissed(v <= scaleTargetPerObject))
	}
	const readyTarget = "ready ≤ 5 s at 100k Locks"
	var readies []string
	slow := false
	for _, p := range pts {
		if p.Locks >= scaleTargetLocks && p.Memory != nil {
			readies = append(readies, fmt.Sprintf("%s at %d Locks and %d objects", p.Memory.Ready.Round(time.Millisecond), p.Locks, p.Objects))
			slow = slow || p.Memory.Ready > scaleTargetReady
		}
	}
	if len(readies) == 0 {
		notReached(readyTarget)
	} else {
		w("| 9 | %s | %s | %s |\n", readyTarget, strings.Join(readies, "; "), metOrMissed(!slow))
	}
}
