package measure

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/e2e/framework"
)

// Modes of the admission-modes benchmark (issue 13's table), besides
// ModeNone and ModePolicy: the lockguard binary with its default flags and
// with --cache-only-decisions.
const (
	ModeLockguard          = "lockguard"
	ModeLockguardCacheOnly = "lockguard-cache-only"
)

// modeLabel labels the namespaces of the admission-modes benchmark with
// their mode; each webhook configuration and the policy select on it.
const modeLabel = "bench.lockguard.navique.com/decide"

// ModesOptions size the admission-modes benchmark.
type ModesOptions struct {
	// Ls are the numbers of other Locks in a namespace (issue 13: 0, 100,
	// 1000).
	Ls []int
	// Rounds of every (mode, L) cell; the order of modes rotates.
	Rounds int
	// Deletes per cell and round, by Clients closed-loop clients.
	Deletes int
	Clients int
	// Payload is the spec size of each Stack.
	Payload int
	// LoadRate is the background write rate (ConfigMap patches per
	// second in a namespace of their own), so that the Lock watch cache is
	// not trivially fresh.
	LoadRate float64
	// WindowIterations per mode of the window test (0: none).
	WindowIterations int
	// WindowModes restricts the window test to these modes (default:
	// every webhook mode).
	WindowModes []string
	// NamespaceGuardLocks, when positive, also measures the namespace
	// guard of the default lockguard at that many Locks in a namespace
	// (nsguard.go), NamespaceGuardDeletes dry-run deletes of each case.
	NamespaceGuardLocks, NamespaceGuardDeletes int
}

// ModeCell is one mode at one L.
type ModeCell struct {
	Latency Latencies // every allowed delete of every round
	// Errors counts deletes of unlocked Stacks that were refused (the
	// webhook failed closed, or a timeout); FirstError is the first.
	Errors     int
	FirstError string
	Rates      []float64       // deletes per second, per round
	P99s       []time.Duration // p99, per round
	P50s       []time.Duration // p50, per round
}

// WindowCount is the outcome of a window test of one mode.
type WindowCount struct {
	// Denied counts denials naming the Lock, Errored refusals for another
	// reason (the webhook could not verify, a timeout).
	Iterations, Slipped, Denied, Errored int
	Latency                              Latencies // of the immediate deletes
	Create                               Latencies // of the Lock creates
}

// ModesResult is one run of the admission-modes benchmark on one version.
type ModesResult struct {
	Version string
	Options ModesOptions
	// Modes in report order.
	Modes []string
	// Cells by mode and L.
	Cells map[string]map[int]*ModeCell
	// PolicyAPI is the ValidatingAdmissionPolicy version used: v1, or
	// v1beta1 behind its feature gate (1.29).
	PolicyAPI string
	// LoadRate is the background write rate achieved, LoadErrors its
	// failed writes.
	LoadRate   float64
	LoadErrors int64
	// Windows by mode.
	Windows map[string]*WindowCount
	// WindowModes in report order.
	WindowModes []string
	// NamespaceGuard is the namespace guard's decision time, if measured.
	NamespaceGuard *NamespaceGuardResult
	Took           time.Duration
}

// Ratio returns the median over rounds of the per-round ratio of stat of
// mode a and of mode b at L (same round, same L).
func (r *ModesResult) Ratio(a, b string, l int, stat func(c *ModeCell, round int) float64) float64 {
	ca, cb := r.Cells[a][l], r.Cells[b][l]
	if ca == nil || cb == nil {
		return 0
	}
	var xs []float64
	for i := range min(len(ca.Rates), len(cb.Rates)) {
		if d := stat(cb, i); d > 0 {
			xs = append(xs, stat(ca, i)/d)
		}
	}
	return median(xs)
}

// P99Stat is a Ratio statistic: the cell's p99 in round.
func P99Stat(c *ModeCell, round int) float64 { return float64(c.P99s[round]) }

// RateStat is a Ratio statistic: the cell's deletes per second in round.
func RateStat(c *ModeCell, round int) float64 { return c.Rates[round] }

// MedianRate is the median over rounds of c's throughput.
func (c *ModeCell) MedianRate() float64 { return median(slices.Clone(c.Rates)) }

// BenchModes measures, side by side on one control plane, the latency and
// throughput of allowed DELETEs with no admission, the seed's policy and
// the lockguard binary (default flags and cache-only), in namespaces
// holding each of o.Ls other Locks, under a background write load; then
// the protection window of each webhook mode, and the namespace guard.
// lockguard is the path of the lockguard binary.
func (c *Cluster) BenchModes(ctx context.Context, lockguard string, o ModesOptions, progress func(format string, args ...any)) (*ModesResult, error) {
	started := time.Now()
	res := &ModesResult{Version: c.Env.Version, Options: o, Cells: map[string]map[int]*ModeCell{}, Windows: map[string]*WindowCount{}}
	var err error
	if res.PolicyAPI, err = c.policyAPI(); err != nil {
		return nil, err
	}

	progress("starting lockguard (default flags and --cache-only-decisions)")
	// Two replicas share the Lease; with the harness's short lease (4s)
	// a leader starved of CPU for seconds loses it and exits, so these
	// take longer ones.
	lease := []string{"--leader-election-lease-duration=60s", "--leader-election-renew-deadline=45s", "--leader-election-retry-period=5s"}
	def, err := c.StartLockguardOn(c.Webhook, lockguard, lease...)
	if err != nil {
		return nil, err
	}
	defer def.Stop()
	cacheOnlyWH, err := framework.NewLocalWebhook(c.Env.Dir)
	if err != nil {
		return nil, err
	}
	cacheOnly, err := c.StartLockguardOn(cacheOnlyWH, lockguard, append(lease, "--cache-only-decisions=true")...)
	if err != nil {
		return nil, err
	}
	defer cacheOnly.Stop()
	// def is warm only while the Lock-create entry of the chart's
	// configuration calls it (internal/peers); the chart's configuration
	// is not installed here, so the bench installs that entry alone.
	removeEntry, err := c.installCreateEntry(ctx)
	if err != nil {
		return nil, err
	}
	defer removeEntry()
	alive := func() error {
		for _, lg := range []*Lockguard{def, cacheOnly} {
			if err := lg.ExitError(); err != nil {
				return err
			}
		}
		return nil
	}
	for _, lg := range []*Lockguard{def, cacheOnly} {
		if _, err := lg.WaitReady(ctx); err != nil {
			return nil, err
		}
		if err := lg.WaitWarm(ctx); err != nil {
			return nil, err
		}
	}
	// Measured warm throughout, or the run fails (Lockguard.StayedWarm).
	warm, err := def.StayedWarm()
	if err != nil {
		return nil, err
	}

	res.Modes = []string{ModeNone}
	if res.PolicyAPI != "" {
		res.Modes = append(res.Modes, ModePolicy)
	}
	res.Modes = append(res.Modes, ModeLockguard, ModeLockguardCacheOnly)
	webhookModes := map[string]*framework.LocalWebhook{ModeLockguard: c.Webhook, ModeLockguardCacheOnly: cacheOnlyWH}
	for _, m := range []string{ModeLockguard, ModeLockguardCacheOnly} {
		if err := c.installWebhookFor(ctx, m, webhookModes[m]); err != nil {
			return nil, err
		}
	}
	if res.PolicyAPI != "" {
		if err := c.createPolicy(ctx, res.PolicyAPI, &metav1.LabelSelector{MatchLabels: map[string]string{modeLabel: ModePolicy}}); err != nil {
			return nil, err
		}
	}

	// Namespaces: L other Locks (targets that do not exist) and a locked
	// sentinel Stack each, to check the mode is in effect.
	progress("creating %d namespaces and their Locks", len(res.Modes)*len(o.Ls))
	total := 0
	for _, m := range res.Modes {
		res.Cells[m] = map[int]*ModeCell{}
		for _, l := range o.Ls {
			res.Cells[m][l] = &ModeCell{}
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: modeNS(m, l), Labels: map[string]string{modeLabel: m}}}
			if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, ns)); err != nil {
				return nil, err
			}
			if err := c.CreateAll(ctx, l, 16, func(i int) client.Object {
				return LockOn(ns.Name, fmt.Sprintf("other-%d", i), fmt.Sprintf("other-%d", i))
			}); err != nil {
				return nil, err
			}
			if err := c.CreateAll(ctx, 1, 1, func(int) client.Object { return Stack(ns.Name, "locked-0", o.Payload) }); err != nil {
				return nil, err
			}
			if err := c.CreateAll(ctx, 1, 1, func(int) client.Object { return LockOn(ns.Name, "protect-locked-0", "locked-0") }); err != nil {
				return nil, err
			}
			total += l + 1
		}
	}
	progress("waiting until lockguard has written the status of %d Locks", total)
	if err := waitSettled(ctx, total, def, cacheOnly); err != nil {
		return nil, err
	}
	for _, m := range res.Modes {
		want := m
		if want != ModeNone && want != ModePolicy {
			want = ModeWebhook
		}
		for _, l := range o.Ls {
			if err := waitMode(ctx, c.Client, want, Stack(modeNS(m, l), "locked-0", 0)); err != nil {
				return nil, fmt.Errorf("mode %s, L=%d: %w", m, l, err)
			}
		}
	}

	stopLoad, err := c.BackgroundLoad(ctx, o.LoadRate)
	if err != nil {
		return nil, err
	}
	loadStopped := false
	defer func() {
		if !loadStopped {
			stopLoad()
		}
	}()
	if err := c.closedLoop(ctx, res, alive, progress); err != nil {
		return nil, err
	}
	if o.WindowIterations > 0 {
		res.WindowModes = []string{ModeLockguard, ModeLockguardCacheOnly}
		if len(o.WindowModes) > 0 {
			res.WindowModes = slices.DeleteFunc(res.WindowModes, func(m string) bool { return !slices.Contains(o.WindowModes, m) })
		}
		progress("protection window: %d iterations of each of %d modes, interleaved", o.WindowIterations, len(res.WindowModes))
		if err := c.benchWindows(ctx, res, o.WindowIterations); err != nil {
			return nil, err
		}
		if err := alive(); err != nil {
			return nil, fmt.Errorf("after the window test: %w", err)
		}
	}
	if o.NamespaceGuardLocks > 0 {
		progress("namespace guard: %d Locks in a namespace, %d dry-run deletes of each case", o.NamespaceGuardLocks, o.NamespaceGuardDeletes)
		if res.NamespaceGuard, err = c.benchNamespaceGuard(ctx, c.Webhook, o.NamespaceGuardLocks, o.NamespaceGuardDeletes); err != nil {
			return nil, fmt.Errorf("namespace guard: %w", err)
		}
		if err := alive(); err != nil {
			return nil, fmt.Errorf("after the namespace guard: %w", err)
		}
	}
	res.LoadRate, res.LoadErrors = stopLoad()
	loadStopped = true
	if err := warm(); err != nil {
		return nil, fmt.Errorf("lockguard (default flags): %w", err)
	}
	res.Took = time.Since(started)
	return res, nil
}

// closedLoop runs res.Options.Rounds rounds of allowed deletes: in each,
// every (mode, L) cell in turn, order rotating per round, its deletes by
// the closed-loop clients. alive reports a lockguard that exited.
func (c *Cluster) closedLoop(ctx context.Context, res *ModesResult, alive func() error, progress func(format string, args ...any)) error {
	o := res.Options
	clients, err := c.clients(o.Clients)
	if err != nil {
		return err
	}
	for round := range o.Rounds {
		progress("closed-loop round %d of %d: creating %d Stacks", round+1, o.Rounds, len(res.Modes)*len(o.Ls)*o.Deletes)
		name := func(i int) string { return fmt.Sprintf("r%d-%d", round, i) }
		for _, m := range res.Modes {
			for _, l := range o.Ls {
				if err := c.CreateAll(ctx, o.Deletes, 16, func(i int) client.Object { return Stack(modeNS(m, l), name(i), o.Payload) }); err != nil {
					return err
				}
			}
		}
		for k := range o.Ls {
			l := o.Ls[(k+round)%len(o.Ls)]
			for j := range res.Modes {
				m := res.Modes[(j+round)%len(res.Modes)]
				ns := modeNS(m, l)
				var lat Latencies
				cell := res.Cells[m][l]
				var mu sync.Mutex
				start := time.Now()
				if err := Parallel(ctx, o.Deletes, o.Clients, func(ctx context.Context, i int) error {
					t := time.Now()
					err := clients[i%len(clients)].Delete(ctx, Stack(ns, name(i), 0))
					lat.Add(time.Since(t))
					if err != nil {
						mu.Lock()
						if cell.Errors++; cell.FirstError == "" {
							cell.FirstError = err.Error()
						}
						mu.Unlock()
					}
					return ctx.Err()
				}); err != nil {
					return err
				}
				if err := alive(); err != nil {
					return fmt.Errorf("mode %s, L=%d, round %d: %w", m, l, round, err)
				}
				cell.Rates = append(cell.Rates, float64(o.Deletes)/time.Since(start).Seconds())
				cell.P99s = append(cell.P99s, lat.Quantile(0.99))
				cell.P50s = append(cell.P50s, lat.Quantile(0.5))
				cell.Latency.Merge(&lat)
			}
		}
	}
	return nil
}

// waitSettled waits until every lockguard's cache holds at least total
// Locks, none of them pending (status not written).
func waitSettled(ctx context.Context, total int, lgs ...*Lockguard) error {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		ok := true
		var last string
		for _, lg := range lgs {
			m, err := lg.Metrics()
			if err != nil {
				return err
			}
			n, pending := 0.0, m[`lockguard_locks{state="pending"}`]
			for k, v := range m {
				if strings.HasPrefix(k, "lockguard_locks{") {
					n += v
				}
			}
			if int(n) < total || pending > 0 {
				ok = false
				last = fmt.Sprintf("%v Locks cached, %v pending", n, pending)
			}
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lockguard not settled after 10 minutes: %s of %d", last, total)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// benchWindows runs the window test of every mode in res.WindowModes,
// interleaved: iteration i creates a Lock on Stack w-<i> of each mode's
// window namespace, in a rotating order, and deletes the Stack as soon as
// the create returns. A delete that succeeds slipped through.
func (c *Cluster) benchWindows(ctx context.Context, res *ModesResult, n int) error {
	for _, m := range res.WindowModes {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: windowNS(m), Labels: map[string]string{modeLabel: m}}}
		if err := client.IgnoreAlreadyExists(c.Client.Create(ctx, ns)); err != nil {
			return err
		}
		if err := c.CreateAll(ctx, n, 16, func(i int) client.Object { return Stack(ns.Name, fmt.Sprintf("w-%d", i), 256) }); err != nil {
			return err
		}
		res.Windows[m] = &WindowCount{}
	}
	clients, err := c.clients(1)
	if err != nil {
		return err
	}
	cl := clients[0]
	for i := range n {
		for j := range res.WindowModes {
			m := res.WindowModes[(i+j)%len(res.WindowModes)]
			ns, target := windowNS(m), fmt.Sprintf("w-%d", i)
			lockName := "protect-" + target
			w := res.Windows[m]
			start := time.Now()
			if err := cl.Create(ctx, LockOn(ns, lockName, target)); err != nil {
				return fmt.Errorf("window %s: creating a Lock on %s: %w", m, target, err)
			}
			w.Create.Add(time.Since(start))
			start = time.Now()
			err := cl.Delete(ctx, Stack(ns, target, 0))
			w.Latency.Add(time.Since(start))
			w.Iterations++
			switch {
			case err == nil:
				w.Slipped++
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "resource is protected by Lock(s) ["+lockName+"]"):
				w.Denied++
			default:
				w.Errored++
			}
		}
	}
	return nil
}
