package measure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/e2e/framework"
)

// The raw-write baseline writes copies of the Lock and Stack kinds in
// another group, which lockguard does not watch.
const benchGroup = "bench.navique.com"

var (
	benchLockGVK  = schema.GroupVersionKind{Group: benchGroup, Version: "v1alpha1", Kind: "BenchLock"}
	benchStackGVK = schema.GroupVersionKind{Group: benchGroup, Version: "v1alpha1", Kind: "BenchStack"}
)

// installBenchCRDs installs BenchLock (the Lock CRD, schema and status
// subresource included) and BenchStack (the Stack CRD) in benchGroup.
func (c *Cluster) installBenchCRDs(ctx context.Context) error {
	for _, crd := range []struct{ file, kind, plural string }{
		{filepath.Join(framework.LockCRDDir(c.Root), "core.navique.com_locks.yaml"), "Lock", "locks"},
		{filepath.Join(c.Root, "e2e", "testdata", "crds", "stacks.yaml"), "Stack", "stacks"},
	} {
		data, err := os.ReadFile(crd.file)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.NewYAMLOrJSONDecoder(strings.NewReader(string(data)), 4096).Decode(&u.Object); err != nil {
			return err
		}
		kind, plural := "Bench"+crd.kind, "bench"+crd.plural
		u.SetName(plural + "." + benchGroup)
		u.SetAnnotations(nil)
		_ = unstructured.SetNestedField(u.Object, benchGroup, "spec", "group")
		_ = unstructured.SetNestedStringMap(u.Object, map[string]string{
			"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind),
		}, "spec", "names")
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, u)); err != nil {
			return fmt.Errorf("creating CRD %s: %w", u.GetName(), err)
		}
	}
	// Wait until both are served.
	deadline := time.Now().Add(time.Minute)
	for _, gvk := range []schema.GroupVersionKind{benchLockGVK, benchStackGVK} {
		for {
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			err := c.Client.List(ctx, list, client.InNamespace("default"), client.Limit(1))
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not served: %w", gvk, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	// The client's REST mapper may have cached the group's absence.
	var err error
	c.Client, err = client.New(c.Config, client.Options{Scheme: c.Scheme})
	return err
}

// ConvergenceOptions size the convergence benchmark.
type ConvergenceOptions struct {
	Locks    int           // Locks created in a burst
	Creators int           // concurrent creators of the burst
	Workers  int           // lockguard's --max-concurrent-reconciles
	Rate     float64       // steady Locks per second
	Steady   time.Duration // how long the steady phase lasts
}

// ConvergenceResult is the outcome of the convergence benchmark.
type ConvergenceResult struct {
	Options ConvergenceOptions
	// Raw: the same writes by a plain client (annotation patch + status
	// patch per Lock, Workers annotation writers feeding Workers status
	// writers), from the first create to the last status write.
	Raw time.Duration
	// Lockguard: from the first create to every Lock active (and so every
	// target annotated).
	Lockguard time.Duration
	// Annotated is how many burst targets carried the annotation at the end.
	Annotated int
	// Steady: create→active latency at Rate Locks per second.
	Steady      Latencies
	SteadyCount int
	SteadyLost  int // steady Locks not active 30s after the phase ended
	// Reconciles counts lockguard's reconciles during the burst, by
	// controller and result; CPU is the CPU time lockguard used then.
	Reconciles map[string]float64
	CPU        time.Duration
}

// Rates returns Locks per second of the raw client and of lockguard.
func (r *ConvergenceResult) Rates() (raw, lockguard float64) {
	return float64(r.Options.Locks) / r.Raw.Seconds(), float64(r.Options.Locks) / r.Lockguard.Seconds()
}

// activeWatch records when each Lock of a namespace is first seen active.
type activeWatch struct {
	mu     sync.Mutex
	active map[string]time.Time
	cancel context.CancelFunc
}

// watchActive starts an informer on the Locks of ns.
func (c *Cluster) watchActive(ctx context.Context, ns string) (*activeWatch, error) {
	ch, err := cache.New(c.Config, cache.Options{Scheme: c.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		return nil, err
	}
	inf, err := ch.GetInformer(ctx, &lockv1alpha1.Lock{})
	if err != nil {
		return nil, err
	}
	w := &activeWatch{active: map[string]time.Time{}}
	record := func(obj any) {
		if l, ok := obj.(*lockv1alpha1.Lock); ok && l.Status.Active {
			w.mu.Lock()
			if _, seen := w.active[l.Name]; !seen {
				w.active[l.Name] = time.Now()
			}
			w.mu.Unlock()
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    record,
		UpdateFunc: func(_, obj any) { record(obj) },
	}); err != nil {
		return nil, err
	}
	ctx, w.cancel = context.WithCancel(ctx)
	go func() { _ = ch.Start(ctx) }()
	if !ch.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the Lock informer of %s did not sync", ns)
	}
	return w, nil
}

// count returns how many Locks are active, and when the last became so.
func (w *activeWatch) count() (int, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var last time.Time
	for _, t := range w.active {
		if t.After(last) {
			last = t
		}
	}
	return len(w.active), last
}

func (w *activeWatch) at(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t, ok := w.active[name]
	return t, ok
}

// BenchConvergence measures how fast lockguard (running) makes a burst of
// Locks active, against a plain client doing the same writes, then the
// create→active latency at a steady rate. The Locks and targets stay.
func (c *Cluster) BenchConvergence(ctx context.Context, lg *Lockguard, o ConvergenceOptions) (*ConvergenceResult, error) {
	res := &ConvergenceResult{Options: o}
	if err := c.installBenchCRDs(ctx); err != nil {
		return nil, err
	}
	const rawNS, ns, steadyNS = "bench-conv-raw", "bench-conv", "bench-steady"
	for _, n := range []string{rawNS, ns, steadyNS} {
		if err := c.CreateNamespace(ctx, n); err != nil {
			return nil, err
		}
	}
	name := func(i int) string { return fmt.Sprintf("c-%d", i) }
	benchStack := func(i int) client.Object {
		u := Stack(rawNS, name(i), 256)
		u.SetGroupVersionKind(benchStackGVK)
		return u
	}
	if err := c.CreateAll(ctx, o.Locks, 64, benchStack); err != nil {
		return nil, err
	}
	if err := c.CreateAll(ctx, o.Locks, 64, func(i int) client.Object { return Stack(ns, name(i), 256) }); err != nil {
		return nil, err
	}

	// The plain client: creates, then per Lock an annotation patch of the
	// target and a status patch of the Lock, as lockguard's two reconcilers
	// do, with the same number of workers each.
	var err error
	if res.Raw, err = c.rawWrites(ctx, rawNS, o); err != nil {
		return nil, fmt.Errorf("raw writes: %w", err)
	}

	// lockguard.
	w, err := c.watchActive(ctx, ns)
	if err != nil {
		return nil, err
	}
	m0, _ := lg.Metrics()
	cpu0, _ := lg.CPUTime()
	start := time.Now()
	if err := c.CreateAll(ctx, o.Locks, o.Creators, func(i int) client.Object { return LockOn(ns, name(i), name(i)) }); err != nil {
		w.cancel()
		return nil, err
	}
	deadline := time.Now().Add(10 * time.Minute)
	for {
		n, last := w.count()
		if n >= o.Locks {
			res.Lockguard = last.Sub(start)
			break
		}
		if time.Now().After(deadline) {
			w.cancel()
			return nil, fmt.Errorf("%d of %d Locks active after 10 minutes", n, o.Locks)
		}
		time.Sleep(100 * time.Millisecond)
	}
	w.cancel()
	cpu1, _ := lg.CPUTime()
	res.CPU = cpu1 - cpu0
	m1, _ := lg.Metrics()
	res.Reconciles = map[string]float64{}
	for k, v := range m1 {
		if strings.HasPrefix(k, "controller_runtime_reconcile_total{") && v-m0[k] > 0 {
			res.Reconciles[strings.TrimPrefix(k, "controller_runtime_reconcile_total")] = v - m0[k]
		}
	}
	stacks := &metav1.PartialObjectMetadataList{}
	stacks.SetGroupVersionKind(StackGVK.GroupVersion().WithKind("StackList"))
	if err := c.Client.List(ctx, stacks, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	for _, s := range stacks.Items {
		if s.Annotations[lockv1alpha1.LockedAnnotation] == s.Name {
			res.Annotated++
		}
	}

	// Steady rate.
	if o.Rate > 0 && o.Steady > 0 {
		n := int(o.Rate * o.Steady.Seconds())
		res.SteadyCount = n
		sname := func(i int) string { return fmt.Sprintf("s-%d", i) }
		if err := c.CreateAll(ctx, n, 64, func(i int) client.Object { return Stack(steadyNS, sname(i), 256) }); err != nil {
			return nil, err
		}
		w, err := c.watchActive(ctx, steadyNS)
		if err != nil {
			return nil, err
		}
		defer w.cancel()
		created := make([]time.Time, n)
		if err := Paced(ctx, n, 16, o.Rate, func(ctx context.Context, i int) error {
			created[i] = time.Now()
			return retry(ctx, func() error { return c.Client.Create(ctx, LockOn(steadyNS, sname(i), sname(i))) })
		}); err != nil {
			return nil, err
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			if got, _ := w.count(); got >= n || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		for i := range n {
			if t, ok := w.at(sname(i)); ok {
				res.Steady.Add(t.Sub(created[i]))
			} else {
				res.SteadyLost++
			}
		}
	}
	return res, nil
}

// rawWrites creates o.Locks BenchLocks with o.Creators creators; as each
// is created, one of o.Workers annotation writers patches its target's
// annotation and hands it to one of o.Workers status writers, which
// patches its status as lockguard would. It returns the time from the
// first create to the last status write.
func (c *Cluster) rawWrites(ctx context.Context, ns string, o ConvergenceOptions) (time.Duration, error) {
	name := func(i int) string { return fmt.Sprintf("c-%d", i) }
	created := make(chan int, o.Locks)
	annotated := make(chan int, o.Locks)
	errs := make(chan error, 2*o.Workers)
	var annotators, statusWriters sync.WaitGroup
	for range o.Workers {
		annotators.Add(1)
		go func() {
			defer annotators.Done()
			for i := range created {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(benchStackGVK)
				u.SetNamespace(ns)
				u.SetName(name(i))
				patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, lockv1alpha1.LockedAnnotation, name(i))
				if err := retry(ctx, func() error { return c.Client.Patch(ctx, u, client.RawPatch(types.MergePatchType, patch)) }); err != nil {
					errs <- err
					return
				}
				annotated <- i
			}
		}()
		statusWriters.Add(1)
		go func() {
			defer statusWriters.Done()
			for i := range annotated {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(benchLockGVK)
				u.SetNamespace(ns)
				u.SetName(name(i))
				patch := fmt.Appendf(nil, `{"status":{"active":true,"observedGeneration":1,"conditions":[{"type":%q,"status":"True","reason":%q,"message":%q,"observedGeneration":1,"lastTransitionTime":%q}]}}`,
					lockv1alpha1.ConditionReady, lockv1alpha1.ReasonActive,
					fmt.Sprintf("deleting Stack %q is denied while this Lock exists", name(i)), time.Now().UTC().Format(time.RFC3339))
				if err := retry(ctx, func() error {
					return c.Client.Status().Patch(ctx, u, client.RawPatch(types.MergePatchType, patch))
				}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	start := time.Now()
	err := Parallel(ctx, o.Locks, o.Creators, func(ctx context.Context, i int) error {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(benchLockGVK)
		u.SetNamespace(ns)
		u.SetName(name(i))
		u.Object["spec"] = map[string]any{
			"targetRef": map[string]any{"apiVersion": lockv1alpha1.DefaultTargetAPIVersion, "kind": "Stack", "name": name(i)},
			"reason":    "Production environment - remove this Lock deliberately before deleting.",
		}
		if err := retry(ctx, func() error { return c.Client.Create(ctx, u) }); err != nil {
			return err
		}
		created <- i
		return nil
	})
	close(created)
	annotators.Wait()
	close(annotated)
	statusWriters.Wait()
	took := time.Since(start)
	close(errs)
	for e := range errs {
		err = errors.Join(err, e)
	}
	return took, err
}
