package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Reads of the confirming-read benchmark (issue 13): what each candidate
// sends to the API server to learn the Locks of a target its cache does
// not protect, plus variants no candidate uses but the question asks
// about. Every read is of the Locks of a namespace holding L other Locks,
// for a target none of them protects.
const (
	ReadList      = "list"       // consistent list of the namespace (lockguard today)
	ReadListLimit = "list-limit" // the same with limit=500, following continue tokens
	ReadListRV0   = "list-rv0"   // resourceVersion=0: the watch cache as it is (not consistent)
	ReadListNOT   = "list-not-older-than"
	ReadListLabel = "list-label"  // label selector on TargetLabel
	ReadListField = "list-fields" // field selector on the selectable fields
	ReadListName  = "list-name"   // field selector metadata.name=<derived name>: a single-key list
	ReadGet       = "get"         // GET of the derived name (not found)
	ReadGetRV0    = "get-rv0"     // the same with resourceVersion=0 (not consistent)
)

// Reads in report order.
var Reads = []string{ReadList, ReadListLimit, ReadListLabel, ReadListField, ReadListName, ReadGet, ReadListRV0, ReadListNOT, ReadGetRV0}

// ConsistentRead reports whether read returns at least every Lock whose
// create returned before the read was sent.
func ConsistentRead(read string) bool {
	switch read {
	case ReadListRV0, ReadListNOT, ReadGetRV0:
		return false
	}
	return true
}

// ReadsOptions size the confirming-read benchmark.
type ReadsOptions struct {
	Ls []int
	// Isolated reads per (read, L): one at a time, 150 ms apart (longer
	// than the API server's 100 ms progress-request period).
	Isolated int
	// AfterWrite reads per (read, L): one at a time, each right after a
	// write of another resource returned, as when deletes are confirmed
	// one after another (every delete is a write).
	AfterWrite int
	// Concurrent reads per (read, L), by Workers closed-loop workers.
	Concurrent int
	Workers    int
	// LoadRate is the background write rate (see DecisionOptions).
	LoadRate float64
	// Attribution reads per read variant, alone, between two scrapes of the
	// API server's metrics.
	Attribution int
}

// ReadsResult is one run of the confirming-read benchmark.
type ReadsResult struct {
	Version          string
	Options          ReadsOptions
	Reads            []string
	Isolated         map[string]map[int]*Latencies
	AfterWrite       map[string]map[int]*Latencies
	Concurrent       map[string]map[int]*Latencies
	ConcurrentRate   map[string]map[int]float64
	Attribution      map[string]string // per read: API server metrics per read
	SelectableFields bool
	LoadRate         float64
}

// readsNS is the namespace of the reads benchmark at l other Locks.
func readsNS(l int) string { return fmt.Sprintf("br-%d", l) }

// read performs one read of kind r in ns, as the confirmation of Stack
// "absent" would; it returns an error when the answer is wrong.
func readOnce(ctx context.Context, cl client.Client, r, ns string, notOlderThan string) error {
	const target = "absent"
	var locks lockv1alpha1.LockList
	var err error
	switch r {
	case ReadList:
		err = cl.List(ctx, &locks, client.InNamespace(ns))
	case ReadListLimit:
		opts := []client.ListOption{client.InNamespace(ns), client.Limit(500)}
		for {
			var page lockv1alpha1.LockList
			if err = cl.List(ctx, &page, opts...); err != nil {
				break
			}
			locks.Items = append(locks.Items, page.Items...)
			if page.Continue == "" {
				break
			}
			opts = []client.ListOption{client.InNamespace(ns), client.Limit(500), client.Continue(page.Continue)}
		}
	case ReadListRV0:
		err = cl.List(ctx, &locks, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: "0"}})
	case ReadListNOT:
		err = cl.List(ctx, &locks, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: notOlderThan, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}})
	case ReadListLabel:
		err = cl.List(ctx, &locks, client.InNamespace(ns), client.MatchingLabels{TargetLabel: TargetLabelValue("Stack", target)})
	case ReadListField:
		err = cl.List(ctx, &locks, client.InNamespace(ns), client.MatchingFields{"spec.targetRef.kind": "Stack", "spec.targetRef.name": target})
	case ReadListName:
		err = cl.List(ctx, &locks, client.InNamespace(ns), client.MatchingFields{"metadata.name": DerivedLockName("Stack", target)})
	case ReadGet, ReadGetRV0:
		var l lockv1alpha1.Lock
		var opts []client.GetOption
		if r == ReadGetRV0 {
			opts = append(opts, &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}})
		}
		err = cl.Get(ctx, types.NamespacedName{Namespace: ns, Name: DerivedLockName("Stack", target)}, &l, opts...)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err == nil {
			return fmt.Errorf("%s: found Lock %s, want none", r, l.Name)
		}
	default:
		return fmt.Errorf("unknown read %q", r)
	}
	if err != nil {
		return fmt.Errorf("%s in %s: %w", r, ns, err)
	}
	return nil
}

// BenchReads measures the confirming reads, as lockguard's ServiceAccount,
// against namespaces holding o.Ls other Locks, under a background write
// load: one at a time, then concurrently, every (read, L) interleaved.
func (c *Cluster) BenchReads(ctx context.Context, o ReadsOptions, progress func(format string, args ...any)) (*ReadsResult, error) {
	res := &ReadsResult{Version: c.Env.Version, Options: o, Isolated: map[string]map[int]*Latencies{}, AfterWrite: map[string]map[int]*Latencies{},
		Concurrent: map[string]map[int]*Latencies{}, ConcurrentRate: map[string]map[int]float64{}, Attribution: map[string]string{}}
	var err error
	if res.SelectableFields, err = c.EnableSelectableFields(ctx); err != nil {
		return nil, err
	}
	res.Reads = slices.DeleteFunc(slices.Clone(Reads), func(r string) bool { return r == ReadListField && !res.SelectableFields })
	for _, l := range o.Ls {
		if err := c.CreateNamespace(ctx, readsNS(l)); err != nil {
			return nil, err
		}
		if err := c.CreateAll(ctx, l, 16, func(i int) client.Object {
			return BenchLock(readsNS(l), fmt.Sprintf("other-%d", i), fmt.Sprintf("other-%d", i))
		}); err != nil {
			return nil, err
		}
	}
	sa, err := c.Env.ServiceAccountConfig()
	if err != nil {
		return nil, err
	}
	clients := make([]client.Client, max(o.Workers, 1))
	for i := range clients {
		if clients[i], err = client.New(Unthrottled(sa), client.Options{Scheme: c.Scheme}); err != nil {
			return nil, err
		}
	}
	// A resourceVersion for list-not-older-than: that of a list just
	// before the run, as an informer's last one would be.
	var probe lockv1alpha1.LockList
	if err := clients[0].List(ctx, &probe, client.InNamespace(readsNS(o.Ls[0]))); err != nil {
		return nil, err
	}
	rv := probe.ResourceVersion

	stopLoad, err := c.BackgroundLoad(ctx, o.LoadRate)
	if err != nil {
		return nil, err
	}
	defer func() {
		if stopLoad != nil {
			stopLoad()
		}
	}()
	type cell struct {
		r string
		l int
	}
	var cells []cell
	for _, r := range res.Reads {
		res.Isolated[r], res.Concurrent[r], res.ConcurrentRate[r] = map[int]*Latencies{}, map[int]*Latencies{}, map[int]float64{}
		res.AfterWrite[r] = map[int]*Latencies{}
		for _, l := range o.Ls {
			res.Isolated[r][l], res.Concurrent[r][l], res.AfterWrite[r][l] = &Latencies{}, &Latencies{}, &Latencies{}
			cells = append(cells, cell{r, l})
		}
	}
	progress("isolated reads: %d of each of %d (read, L), 150 ms apart", o.Isolated, len(cells))
	for i := range o.Isolated * len(cells) {
		k := cells[(i+i/len(cells))%len(cells)]
		start := time.Now()
		if err := readOnce(ctx, clients[0], k.r, readsNS(k.l), rv); err != nil {
			return nil, err
		}
		res.Isolated[k.r][k.l].Add(time.Since(start))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(150 * time.Millisecond):
		}
	}
	progress("reads right after a write: %d of each of %d (read, L)", o.AfterWrite, len(cells))
	for i := range o.AfterWrite * len(cells) {
		k := cells[(i+i/len(cells))%len(cells)]
		if err := c.writeOnce(ctx, i); err != nil {
			return nil, err
		}
		start := time.Now()
		if err := readOnce(ctx, clients[0], k.r, readsNS(k.l), rv); err != nil {
			return nil, err
		}
		res.AfterWrite[k.r][k.l].Add(time.Since(start))
	}
	progress("concurrent reads: %d of each of %d (read, L), %d workers, interleaved", o.Concurrent, len(cells), o.Workers)
	// Rounds of one cell at a time for throughput, in rotating order.
	const rounds = 3
	per := max(o.Concurrent/rounds, 1)
	rates := map[cell][]float64{}
	for round := range rounds {
		for j := range cells {
			k := cells[(j+round)%len(cells)]
			start := time.Now()
			if err := Parallel(ctx, per, o.Workers, func(ctx context.Context, i int) error {
				t := time.Now()
				err := readOnce(ctx, clients[i%len(clients)], k.r, readsNS(k.l), rv)
				res.Concurrent[k.r][k.l].Add(time.Since(t))
				return err
			}); err != nil {
				return nil, err
			}
			rates[k] = append(rates[k], float64(per)/time.Since(start).Seconds())
		}
	}
	for k, xs := range rates {
		res.ConcurrentRate[k.r][k.l] = median(xs)
	}
	if o.Attribution > 0 {
		progress("attribution: %d reads of each kind alone, each right after a write, API server metrics around them", o.Attribution)
		l := o.Ls[len(o.Ls)/2]
		for _, r := range res.Reads {
			before, err := c.apiMetrics(ctx)
			if err != nil {
				return nil, err
			}
			for i := range o.Attribution {
				if err := c.writeOnce(ctx, i); err != nil {
					return nil, err
				}
				if err := readOnce(ctx, clients[0], r, readsNS(l), rv); err != nil {
					return nil, err
				}
			}
			after, err := c.apiMetrics(ctx)
			if err != nil {
				return nil, err
			}
			res.Attribution[r] = attribution(before, after, o.Attribution)
		}
	}
	res.LoadRate, _ = stopLoad()
	stopLoad = nil
	return res, nil
}

// writeOnce patches a ConfigMap of the background load's namespace: a
// write to another resource, which moves etcd's revision past what the
// Lock watch cache has seen.
func (c *Cluster) writeOnce(ctx context.Context, i int) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "bench-load", Name: "load-0"}}
	return c.Client.Patch(ctx, cm, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"data":{"w":"%d"}}`, i)))
}

// apiMetrics scrapes the API server's metrics about Locks: the samples
// whose labels mention locks, by full name.
func (c *Cluster) apiMetrics(ctx context.Context) (map[string]float64, error) {
	hc, err := rest.HTTPClientFor(c.Config)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.Config.Host, "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	s := bufio.NewScanner(resp.Body)
	s.Buffer(make([]byte, 1<<20), 1<<22)
	for s.Scan() {
		line := s.Text()
		if line == "" || line[0] == '#' || !strings.Contains(line, "locks") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, s.Err()
}

// attribution summarises, per read, the Lock metrics of the API server
// that moved: etcd requests by operation, consistent reads from the
// watch cache, and the time reads waited for the cache to be fresh.
func attribution(before, after map[string]float64, n int) string {
	var parts []string
	for _, k := range sortedMetricKeys(after) {
		d := after[k] - before[k]
		if d == 0 {
			continue
		}
		name := k[:strings.IndexByte(k+"{", '{')]
		switch {
		case name == "etcd_requests_total":
			parts = append(parts, fmt.Sprintf("etcd %s %.2f", label(k, "operation"), d/float64(n)))
		case name == "apiserver_watch_cache_consistent_read_total":
			parts = append(parts, fmt.Sprintf("cache consistent read (fallback=%s) %.2f", label(k, "fallback"), d/float64(n)))
		case name == "apiserver_watch_cache_read_wait_seconds_count":
			parts = append(parts, fmt.Sprintf("waited for cache %.2f", d/float64(n)))
		case name == "apiserver_watch_cache_read_wait_seconds_sum":
			parts = append(parts, fmt.Sprintf("mean wait %s", ms(time.Duration(d/float64(n)*float64(time.Second)))))
		case name == "apiserver_cache_list_total":
			parts = append(parts, fmt.Sprintf("list from cache %.2f", d/float64(n)))
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

// label returns the value of label name in a sample's full name.
func label(sample, name string) string {
	i := strings.Index(sample, name+`="`)
	if i < 0 {
		return ""
	}
	rest := sample[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

func sortedMetricKeys(m map[string]float64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
