package measure

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// ScaleSize is a number of Locks, each with the one Stack it covers (half
// by targetRef, half by selector), and of Stacks no Lock covers.
type ScaleSize struct{ Locks, Objects int }

// ScaleOptions say what MeasureScale measures.
type ScaleOptions struct {
	// Points are the sizes measured, in order; each a superset of the one
	// before (objects are only added).
	Points []ScaleSize
	// Namespaces the Locks and objects are spread over (round robin).
	Namespaces int
	// Probes is how many dry-run DELETEs of each kind a point times.
	Probes int
	// Within bounds lockguard's time to ready, and then to idle.
	Within time.Duration
	// Step reports progress.
	Step func(format string, args ...any)
	// Baseline is another lockguard binary (an earlier commit's) measured
	// at each size too, just before the one measured ("": none), so that
	// the two are compared side by side on the same API server.
	Baseline string
	// Profiles is a directory for the heap profile of each lockguard
	// measured, taken with its live heap (MemoryPoint.Live); "": none
	// kept.
	Profiles string
	// WorstLimit, when not 0, runs lockguard once more at the last size
	// under a container memory limit of that many bytes with the
	// transport held at its bounds (worstCase): ScalePoint.Worst.
	WorstLimit int64
	// WorstBaseline is another lockguard binary whose worst case is
	// measured too, just before the one measured ("": none).
	WorstBaseline string
	// WorstEvery runs the worst case at every size with Locks, not only
	// the last.
	WorstEvery bool
}

// ScalePoint is lockguard at one size.
type ScalePoint struct {
	ScaleSize
	// Seeded is the time the new objects took to write into etcd;
	// APIServer the time kube-apiserver then took to start on them.
	Seeded, APIServer time.Duration
	// Memory is lockguard's start-up and memory (MemoryPoint.Locks and
	// Stacks count every Lock and Stack, the template namespace's too).
	Memory *MemoryPoint
	// Baseline is ScaleOptions.Baseline's, measured the same way (nil
	// without one).
	Baseline *MemoryPoint
	// Allowed (an unlocked Stack), TargetRef and Selector (a Stack covered
	// by a targetRef and by a selector Lock, denied): server-side dry-run
	// DELETEs through kube-apiserver and lockguard's webhook, interleaved;
	// ProbeNamespaces says where.
	Allowed, TargetRef, Selector *Latencies
	ProbeNamespaces              string
	// Worst is lockguard under a container's limit with its transport at
	// its bounds (ScaleOptions.WorstLimit; nil: not run at this size).
	Worst *WorstCase
	// WorstBaseline is ScaleOptions.WorstBaseline's worst case (nil
	// without one).
	WorstBaseline *WorstCase
}

// ScaleResult is what MeasureScale measured.
type ScaleResult struct {
	Options ScaleOptions
	Points  []*ScalePoint
	// ObjectBytes and LockBytes are the sizes in etcd of one unlocked Stack
	// and of one Lock with its target (the mean of both forms).
	ObjectBytes, LockBytes int
}

// scaleTemplateNS is the namespace of the objects the seeded ones are
// copied from.
const scaleTemplateNS = "scale-tpl"

// MeasureScale measures binary (default flags, leading, as users run it)
// at each of o.Points on c, a control plane of the benchmark's own. The
// Locks and Stacks are written straight into etcd while kube-apiserver is
// stopped (seed.go), copied from objects created through the API server
// and converged by lockguard first, so that lockguard finds them as it
// leaves them and has nothing to write.
func (c *Cluster) MeasureScale(ctx context.Context, binary string, o ScaleOptions) (*ScaleResult, error) {
	tpl, err := c.scaleTemplates(ctx, binary)
	if err != nil {
		return nil, fmt.Errorf("template objects: %w", err)
	}
	r := &ScaleResult{Options: o, ObjectBytes: len(tpl.leaf.value), LockBytes: tpl.lockBytes()}
	etcd := &etcdKV{url: c.Env.EtcdURL(), hc: &http.Client{Timeout: time.Minute}}
	var prev ScaleSize
	for _, size := range o.Points {
		p := &ScalePoint{ScaleSize: size}
		if size != prev {
			o.Step("scale: namespaces for %d Locks and %d objects", size.Locks, size.Objects)
			if err := c.UninstallWebhook(ctx); err != nil {
				return r, err
			}
			if err := c.scaleNamespaces(ctx, o.Namespaces, size); err != nil {
				return r, err
			}
			o.Step("scale: writing Locks %d-%d and objects %d-%d into etcd, kube-apiserver stopped", prev.Locks, size.Locks, prev.Objects, size.Objects)
			var seeded time.Time
			err := c.Env.RestartAPIServer(ctx, framework.RestartOptions{WhileDown: func(ctx context.Context) error {
				t := time.Now()
				err := tpl.seed(ctx, etcd, o.Namespaces, prev, size)
				p.Seeded, seeded = time.Since(t), time.Now()
				return err
			}})
			if err != nil {
				return r, err
			}
			// Ready once its watch caches of Locks and Stacks are filled
			// from etcd: until then it answers a list from the cache
			// (resourceVersion 0, as informers list) 429, and lockguard
			// would wait for it, as it never does on a warm API server.
			if err := c.waitWatchCaches(ctx, o.Within); err != nil {
				return r, err
			}
			p.APIServer = time.Since(seeded)
			if err := c.InstallWebhook(ctx); err != nil {
				return r, err
			}
			prev = size
		}
		// Leader election as the binary's defaults time it (the benchmarks'
		// other sections shorten it), so that a busy API server at start
		// does not make it lose leadership, and its reconciler's caches.
		leaderArgs := []string{"--leader-election-lease-duration=15s", "--leader-election-renew-deadline=10s", "--leader-election-retry-period=2s"}
		if o.Baseline != "" {
			o.Step("scale: the baseline %s with %d Locks and %d unlocked objects", o.Baseline, size.Locks, size.Objects)
			p.Baseline = &MemoryPoint{Locks: size.Locks + 2, Stacks: size.Locks + size.Objects + len(tpl.stacks())}
			lg, err := c.measureScaleMemory(ctx, p.Baseline, o, "baseline", o.Baseline, leaderArgs)
			if err != nil {
				return r, fmt.Errorf("the baseline: %w", err)
			}
			// It releases its Lease as it stops: the next one leads at once.
			lg.Stop()
		}
		o.Step("scale: lockguard with %d Locks and %d unlocked objects", size.Locks, size.Objects)
		p.Memory = &MemoryPoint{Locks: size.Locks + 2, Stacks: size.Locks + size.Objects + len(tpl.stacks())}
		lg, err := c.measureScaleMemory(ctx, p.Memory, o, "lockguard", binary, leaderArgs)
		if err != nil {
			return r, err
		}
		err = c.scaleProbes(ctx, lg, p, o)
		lg.Stop()
		if err != nil {
			return r, err
		}
		r.Points = append(r.Points, p)
		if o.WorstLimit > 0 && (len(r.Points) == len(o.Points) || o.WorstEvery && size.Locks > 0) {
			o.Step("scale: lockguard with %d Locks and %d unlocked objects under a memory limit of %d MiB, its transport at its bounds", size.Locks, size.Objects, o.WorstLimit>>20)
			hold := WorstHold(p)
			if o.WorstBaseline != "" {
				if p.WorstBaseline, err = c.worstCase(ctx, o.WorstBaseline, p, o.Namespaces, o.WorstLimit, hold, leaderArgs); err != nil {
					return r, fmt.Errorf("the baseline's worst case: %w", err)
				}
			}
			if p.Worst, err = c.worstCase(ctx, binary, p, o.Namespaces, o.WorstLimit, hold, leaderArgs); err != nil {
				return r, fmt.Errorf("the worst case: %w", err)
			}
		}
	}
	return r, nil
}

// measureScaleMemory measures binary's memory into p (measureMemory),
// then its live heap after a forced collection, through its Go profiler on
// a loopback port, keeping the heap profile in o.Profiles as
// <name>-<Locks>-<Stacks>.pb.gz.
func (c *Cluster) measureScaleMemory(ctx context.Context, p *MemoryPoint, o ScaleOptions, name, binary string, args []string) (*Lockguard, error) {
	port, err := framework.FreePort()
	if err != nil {
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	_, lg, err := c.measureMemory(ctx, p, o.Within, true, binary, append(args, "--pprof-bind-address="+addr)...)
	if err != nil {
		return nil, err
	}
	profile := ""
	if o.Profiles != "" {
		if err := os.MkdirAll(o.Profiles, 0o755); err != nil {
			lg.Stop()
			return nil, err
		}
		profile = filepath.Join(o.Profiles, fmt.Sprintf("%s-%d-%d.pb.gz", name, p.Locks, p.Stacks))
	}
	if p.Live, err = lg.LiveHeap(ctx, addr, profile); err != nil {
		lg.Stop()
		return nil, err
	}
	return lg, nil
}

// scaleNamespaces creates the namespaces size's objects need (each
// labelled as lockguard labels a namespace that holds Locks, when it
// does).
func (c *Cluster) scaleNamespaces(ctx context.Context, n int, size ScaleSize) error {
	return Parallel(ctx, min(n, max(size.Locks, size.Objects)), 16, func(ctx context.Context, k int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: scaleNamespace(k)}}
		if k < size.Locks {
			ns.Labels = map[string]string{lockv1alpha1.HasLocksLabel: "true"}
		}
		return retry(ctx, func() error {
			err := c.Client.Create(ctx, ns)
			if !apierrors.IsAlreadyExists(err) {
				return err
			}
			var cur corev1.Namespace
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(ns), &cur); err != nil {
				return err
			}
			if cur.Labels[lockv1alpha1.HasLocksLabel] == ns.Labels[lockv1alpha1.HasLocksLabel] {
				return nil
			}
			cur.Labels = ns.Labels
			return c.Client.Update(ctx, &cur)
		})
	})
}

// scaleNamespace is the name of the k-th namespace.
func scaleNamespace(k int) string { return fmt.Sprintf("scale-%d", k) }

// scaleProbe is a Stack a point's dry-run DELETEs are sent for, whether
// lockguard denies it, and where its latencies go.
type scaleProbe struct {
	ns, name string
	deny     bool
	into     **Latencies
}

// probeTargets are p's probes: a Stack covered by a targetRef Lock, one
// covered by a selector Lock (denied) and an unlocked Stack with no
// dependents (allowed), in the seeded namespaces (of namespaces) when the
// point has them, else in the template namespace.
func (p *ScalePoint) probeTargets(namespaces int) []scaleProbe {
	probes := []scaleProbe{
		{scaleTemplateNS, "tgzz", true, &p.TargetRef},
		{scaleTemplateNS, "svzz", true, &p.Selector},
		{scaleTemplateNS, "unzz", false, &p.Allowed},
	}
	if p.Locks >= 2 {
		probes[0].ns, probes[0].name = scaleNamespace(0), "t-0"
		probes[1].ns, probes[1].name = scaleNamespace(1%namespaces), "t-1"
	}
	if p.Objects >= 2 {
		probes[2].ns, probes[2].name = scaleNamespace(0), "u-1"
	}
	return probes
}

// scaleProbes times p's dry-run DELETEs against lg, once warm: a Stack
// covered by a targetRef Lock and one covered by a selector Lock (denied)
// and an unlocked Stack with no dependents (allowed), in the seeded
// namespaces when the point has them, else in the template namespace.
func (c *Cluster) scaleProbes(ctx context.Context, lg *Lockguard, p *ScalePoint, o ScaleOptions) error {
	if err := lg.WaitWarm(ctx); err != nil {
		return err
	}
	probes := p.probeTargets(o.Namespaces)
	p.ProbeNamespaces = fmt.Sprintf("%s/%s, %s/%s, %s/%s", probes[0].ns, probes[0].name, probes[1].ns, probes[1].name, probes[2].ns, probes[2].name)
	run := func(pr scaleProbe) (time.Duration, error) {
		start := time.Now()
		err := c.Client.Delete(ctx, Stack(pr.ns, pr.name, 0), client.DryRunAll)
		d := time.Since(start)
		switch {
		case pr.deny && !apierrors.IsForbidden(err):
			return d, fmt.Errorf("dry-run delete of Stack %s/%s: %v, want Forbidden", pr.ns, pr.name, err)
		case !pr.deny && err != nil:
			return d, fmt.Errorf("dry-run delete of Stack %s/%s: %w", pr.ns, pr.name, err)
		}
		return d, nil
	}
	for _, pr := range probes {
		*pr.into = &Latencies{}
		if err := waitFor(ctx, func() error { _, err := run(pr); return err }); err != nil {
			return err
		}
	}
	for range o.Probes {
		for _, pr := range probes {
			d, err := run(pr)
			if err != nil {
				return err
			}
			(*pr.into).Add(d)
		}
	}
	return nil
}

// Measured and Baselined pick the lockguard of a point whose figures
// PerLock and PerObject compare: -lockguard's (Memory) or -baseline's.
func Measured(p *ScalePoint) *MemoryPoint  { return p.Memory }
func Baselined(p *ScalePoint) *MemoryPoint { return p.Baseline }

// HeapInuse and LiveHeap pick the figure PerLock and PerObject compare.
func HeapInuse(m *MemoryPoint) int64 { return m.HeapInuse }
func LiveHeap(m *MemoryPoint) int64  { return m.Live }

// PerLock is how much figure fig of the lockguard pick picks grows per
// Lock and target between points a and b with the same unlocked objects;
// PerObject per unlocked object between points with the same Locks. ok is
// false when the points differ otherwise, or where fig was not measured.
func PerLock(a, b *ScalePoint, pick func(*ScalePoint) *MemoryPoint, fig func(*MemoryPoint) int64) (bytes float64, ok bool) {
	return growth(pick(a), pick(b), fig, a.Objects == b.Objects, b.Locks-a.Locks)
}

// PerObject: see PerLock.
func PerObject(a, b *ScalePoint, pick func(*ScalePoint) *MemoryPoint, fig func(*MemoryPoint) int64) (bytes float64, ok bool) {
	return growth(pick(a), pick(b), fig, a.Locks == b.Locks, b.Objects-a.Objects)
}

// growth is fig's growth from am to bm per n added, when same says the
// points differ in that count alone.
func growth(am, bm *MemoryPoint, fig func(*MemoryPoint) int64, same bool, n int) (float64, bool) {
	if !same || n == 0 || am == nil || bm == nil || fig(am) == 0 || fig(bm) == 0 {
		return 0, false
	}
	return float64(fig(bm)-fig(am)) / float64(n), true
}

// waitWatchCaches waits, at most within, until kube-apiserver serves the
// Locks and Stacks from its watch caches.
func (c *Cluster) waitWatchCaches(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	for _, kind := range []string{"LockList", "StackList"} {
		for {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(lockv1alpha1.GroupVersion.WithKind(kind))
			// One item is enough: kube-apiserver answers a list at
			// resourceVersion 0 from its watch cache whole, and one without
			// a watch cache of the kind reads a page from etcd.
			err := c.Client.List(ctx, list, &client.ListOptions{Limit: 1, Raw: &metav1.ListOptions{ResourceVersion: "0"}})
			if err == nil {
				break
			}
			if !apierrors.IsTooManyRequests(err) && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
				return fmt.Errorf("listing %s from the watch cache: %w", kind, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("kube-apiserver's watch cache of %s: %w (last: %v)", kind, ctx.Err(), err)
			case <-time.After(time.Second):
			}
		}
	}
	return nil
}
