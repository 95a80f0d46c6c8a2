package measure

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// MemoryPoint is lockguard's memory with some number of Locks.
type MemoryPoint struct {
	Locks, Stacks int
	// Ready is the time from the process's start to /readyz answering 200.
	Ready time.Duration
	// Settled is the time from ready until lockguard was idle (initial
	// reconciliation done).
	Settled time.Duration
	// RSS and HeapInuse are medians of samples taken once idle; HeapMin is
	// the smallest go_memstats_heap_inuse_bytes seen.
	RSS, HeapInuse, HeapMin, HeapAlloc int64
	// PeakRSS is the largest RSS from the start to the last sample
	// (VmHWM): the initial lists and reconciliation included.
	PeakRSS int64
	// RSSAnon is the median of the samples' anonymous RSS (RssAnon: RSS
	// less the pages of files, the binary's mostly, which a container's
	// memory limit reclaims rather than kills for); PeakAnon the largest
	// sample of it from the start, every 250 ms.
	RSSAnon, PeakAnon int64
	// Live is go_memstats_heap_alloc_bytes right after a forced
	// collection (LiveHeap): the heap the process holds, without the
	// garbage HeapInuse counts; 0 when not measured.
	Live int64
}

// CountObjects counts the Locks and Stacks in the cluster.
func (c *Cluster) CountObjects(ctx context.Context) (locks, stacks int, err error) {
	for _, kind := range []string{"LockList", "StackList"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(lockv1alpha1.GroupVersion.WithKind(kind))
		if err := c.Client.List(ctx, list); err != nil {
			return 0, 0, err
		}
		if kind == "LockList" {
			locks = len(list.Items)
		} else {
			stacks = len(list.Items)
		}
	}
	return locks, stacks, nil
}

// MeasureMemory starts lockguard with args, waits until it is ready and
// then idle, and samples its memory. It returns lockguard running.
func (c *Cluster) MeasureMemory(ctx context.Context, binary string, args ...string) (*MemoryPoint, *Lockguard, error) {
	p := &MemoryPoint{}
	var err error
	if p.Locks, p.Stacks, err = c.CountObjects(ctx); err != nil {
		return nil, nil, err
	}
	return c.measureMemory(ctx, p, 5*time.Minute, false, binary, args...)
}

// measureMemory is MeasureMemory for p, whose counts are set, waiting at
// most within for ready and as long again for idle. With lead, it waits
// until lockguard leads before it waits for idle (its reconciler's first
// pass over every object is then over), and fails if lockguard no longer
// leads once sampled.
func (c *Cluster) measureMemory(ctx context.Context, p *MemoryPoint, within time.Duration, lead bool, binary string, args ...string) (*MemoryPoint, *Lockguard, error) {
	lg, err := c.StartLockguard(binary, args...)
	if err != nil {
		return nil, nil, err
	}
	peakAnon := lg.watchAnon(250 * time.Millisecond)
	defer func() { p.PeakAnon = peakAnon() }()
	readyCtx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if p.Ready, err = lg.WaitReady(readyCtx); err != nil {
		lg.Stop()
		return nil, nil, err
	}
	ready := time.Now()
	if lead {
		if err := lg.waitLeading(readyCtx); err != nil {
			lg.Stop()
			return nil, nil, err
		}
	}
	if err := lg.waitIdle(within); err != nil {
		lg.Stop()
		return nil, nil, err
	}
	p.Settled = time.Since(ready)
	var rss, anon, heap, alloc []int64
	for range 10 {
		m, err := lg.Memory()
		if err != nil {
			lg.Stop()
			return nil, nil, err
		}
		a, err := lg.procStatus("RssAnon")
		if err != nil {
			lg.Stop()
			return nil, nil, err
		}
		rss, anon, heap, alloc = append(rss, m.RSS), append(anon, a), append(heap, m.HeapInuse), append(alloc, m.HeapAlloc)
		time.Sleep(300 * time.Millisecond)
	}
	p.RSS, p.RSSAnon, p.HeapInuse, p.HeapAlloc = medianInt(rss), medianInt(anon), medianInt(heap), medianInt(alloc)
	p.HeapMin = slices.Min(heap)
	if p.PeakRSS, err = lg.PeakRSS(); err != nil {
		lg.Stop()
		return nil, nil, err
	}
	if lead {
		if leads, err := lg.IsLeader(ctx); err != nil || !leads {
			lg.Stop()
			return nil, nil, fmt.Errorf("lockguard no longer leads after its memory was sampled (%v): its reconciler's caches may be gone", err)
		}
	}
	return p, lg, nil
}

// waitLeading waits until the process leads.
func (l *Lockguard) waitLeading(ctx context.Context) error {
	for {
		leads, err := l.IsLeader(ctx)
		if err == nil && leads {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("lockguard did not lead (%v): %w", err, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitIdle waits until the process uses under 3% of a CPU over a second
// (after at least 2s), and kube-apiserver under 10% over the same second,
// so that its initial reconciliation is over. The second condition is
// what makes it over: at a million objects kube-apiserver serves a list
// from etcd at 100% of a CPU while lockguard, waiting for its pages,
// uses almost none (run P, docs/history/scale-runs.md: a binary sampled
// before its list was in).
func (l *Lockguard) waitIdle(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	time.Sleep(2 * time.Second)
	prev, err := l.CPUTime()
	if err != nil {
		return err
	}
	prevAPI := ProcessCPU()["kube-apiserver"]
	for {
		time.Sleep(time.Second)
		cur, err := l.CPUTime()
		if err != nil {
			return err
		}
		curAPI := ProcessCPU()["kube-apiserver"]
		if cur-prev < 30*time.Millisecond && curAPI-prevAPI < 100*time.Millisecond {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lockguard still busy after %s (or kube-apiserver serving it)", timeout)
		}
		prev, prevAPI = cur, curAPI
	}
}

func medianInt(xs []int64) int64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// GrowTemplate is a Lock and its Stack as lockguard converged them, for
// GrowLocks to copy: its status, and its Stack's labels and annotations,
// with the template's name replaced. Copied, not written out here, so
// that what the bench seeds is what the reconciler of the binary under
// test writes (a status written by hand went stale when the reconciler
// began writing status.scope and status.protected, and the binary then
// rewrote every seeded Lock at its start: make bench at 0c57d45 never saw
// it idle at 100,000 Locks).
type GrowTemplate struct {
	name        string
	status      string
	labels      string
	annotations string
}

// growTemplateName is the name of the template Lock and its Stack.
const growTemplateName = "m-template"

// ConvergedTemplate creates the template Lock and Stack in ns and waits
// until lockguard, running, has converged them (the Lock active with the
// Stack it protects, the Stack annotated), then returns them.
func (c *Cluster) ConvergedTemplate(ctx context.Context, ns string) (*GrowTemplate, error) {
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return nil, err
	}
	s := Stack(ns, growTemplateName, 256)
	if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, s)); err != nil {
		return nil, err
	}
	if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, LockOn(ns, growTemplateName, growTemplateName))); err != nil {
		return nil, err
	}
	t := &GrowTemplate{name: growTemplateName}
	err := waitFor(ctx, func() error {
		var l lockv1alpha1.Lock
		if err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: growTemplateName}, &l); err != nil {
			return err
		}
		if !l.Status.Active || l.Status.Protected == nil || l.Status.Protected.Count != 1 {
			return fmt.Errorf("the template Lock %s/%s is not active with its Stack yet", ns, growTemplateName)
		}
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		if s.GetAnnotations()[lockv1alpha1.LockedAnnotation] == "" {
			return fmt.Errorf("the template Stack %s/%s is not annotated yet", ns, growTemplateName)
		}
		for into, v := range map[*string]any{&t.status: l.Status, &t.labels: s.GetLabels(), &t.annotations: s.GetAnnotations()} {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			*into = string(b)
		}
		return nil
	})
	return t, err
}

// copyFor unmarshals the template's data (one of its fields) for the Lock
// and Stack named name into into.
func (t *GrowTemplate) copyFor(data, name string, into any) error {
	return json.Unmarshal([]byte(strings.ReplaceAll(data, t.name, name)), into)
}

// GrowLocks creates n more Locks in namespace ns, m-<from> to
// m-<from+n-1>, each with its Stack, already converged as lockguard
// leaves them (copies of t: the Stack's labels and annotations, the
// Lock's status), so that lockguard, stopped meanwhile, finds nothing to
// write when it starts.
func (c *Cluster) GrowLocks(ctx context.Context, t *GrowTemplate, ns string, from, n, workers int) error {
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return err
	}
	return Parallel(ctx, n, workers, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("m-%d", from+i)
		s := Stack(ns, name, 256)
		var labels, annotations map[string]string
		if err := t.copyFor(t.labels, name, &labels); err != nil {
			return err
		}
		if err := t.copyFor(t.annotations, name, &annotations); err != nil {
			return err
		}
		s.SetLabels(labels)
		s.SetAnnotations(annotations)
		if err := retry(ctx, func() error { return client.IgnoreAlreadyExists(c.Client.Create(ctx, s)) }); err != nil {
			return err
		}
		l := LockOn(ns, name, name)
		if err := retry(ctx, func() error { return client.IgnoreAlreadyExists(c.Client.Create(ctx, l)) }); err != nil {
			return err
		}
		if err := t.copyFor(t.status, name, &l.Status); err != nil {
			return err
		}
		return retry(ctx, func() error { return c.Client.Status().Update(ctx, l) })
	})
}
