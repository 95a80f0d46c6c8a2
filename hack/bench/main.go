// Command bench runs lockguard's performance benchmarks (issue 6) on this
// machine and writes docs/benchmarks.md: the handler's Go benchmarks, the
// webhook server over TLS against a bare Go server, DELETE latency through
// a real API server with no admission, the ValidatingAdmissionPolicy and
// lockguard's webhook, memory and start-up, convergence against a plain
// client, and the protection window. Every target is a ratio to a baseline
// measured in the same run, or a latency bound. `make bench` runs it;
// BENCH_SCALE (or -scale) shrinks the sizes for a quick run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/hack/bench/measure"
)

func main() {
	var o options
	flag.Float64Var(&o.scale, "scale", envScale(), "Scale of the sizes (Locks, deletes, durations); 1 is the issue's. Default $BENCH_SCALE or 1.")
	flag.StringVar(&o.out, "out", "docs/benchmarks.md", "Where to write the report.")
	flag.StringVar(&o.lockguard, "lockguard", "bin/lockguard", "The lockguard binary.")
	flag.StringVar(&o.only, "only", "", "Comma-separated subset of "+strings.Join(sections, ",")+" (default all).")
	flag.StringVar(&o.modesVersions, "modes-versions", "", "Kubernetes versions of the modes section (issue 13's four admission modes, issue 12's namespace guard), each on a control plane of its own, space or comma separated (default $LOCKGUARD_KUBE_VERSION or the default version).")
	flag.StringVar(&o.args, "lockguard-args", "", "Extra flags for every lockguard started, space-separated.")
	flag.StringVar(&o.baseline, "baseline", "", "Another lockguard binary (an earlier commit's) whose start-up section 4 compares with -lockguard's at its largest point (the two started alternately, 3 times each), and which the scale section measures at each size too, just before -lockguard.")
	flag.BoolVar(&o.verbose, "v", false, "Show the control plane's and lockguard's logs.")
	cmdLine := flag.String("command-line", "", "The command to record in the report (default: this one).")
	bareAddr := flag.String("bare-server", "", "Internal: serve the bare baseline server at this address.")
	bareCerts := flag.String("bare-cert-dir", "", "Internal: certificate directory of the bare server.")
	flag.Parse()
	if *bareAddr != "" {
		fmt.Fprintln(os.Stderr, measure.ServeBare(*bareAddr, *bareCerts))
		os.Exit(1)
	}
	if err := o.checkOnly(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if o.modesVersions == "" {
		o.modesVersions = framework.Version()
	}
	ctrl.SetLogger(logr.Discard())
	o.command = commandLine()
	if *cmdLine != "" {
		o.command = *cmdLine
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	scale     float64
	out       string
	lockguard string
	// baseline is a lockguard binary whose start-up is compared ("": none).
	baseline string
	only     string
	args     string
	verbose  bool
	command  string
	// modesVersions are the Kubernetes versions of the modes section.
	modesVersions string
}

// sections are the report's sections, in the order they run.
var sections = []string{"handler", "webhook", "api", "window", "convergence", "memory", "modes", "cascade", "selectors", "scale"}

// checkOnly returns an error naming the first section of -only that is
// not one of sections.
func (o options) checkOnly() error {
	if o.only == "" {
		return nil
	}
	for _, n := range strings.Split(o.only, ",") {
		if !slices.Contains(sections, strings.TrimSpace(n)) {
			return fmt.Errorf("-only: no section %q (sections: %s)", strings.TrimSpace(n), strings.Join(sections, ","))
		}
	}
	return nil
}

// want reports whether section name runs: every section, or those -only
// names.
func (o options) want(name string) bool {
	if o.only == "" {
		return true
	}
	for _, n := range strings.Split(o.only, ",") {
		if strings.TrimSpace(n) == name {
			return true
		}
	}
	return false
}

// n scales a size, to at least lo.
func (o options) n(full, lo int) int { return max(lo, int(float64(full)*o.scale)) }

// d scales a duration, to at least lo.
func (o options) d(full, lo time.Duration) time.Duration {
	return max(lo, time.Duration(float64(full)*o.scale))
}

func envScale() float64 {
	var s float64 = 1
	if v := os.Getenv("BENCH_SCALE"); v != "" {
		if _, err := fmt.Sscan(v, &s); err != nil || s <= 0 {
			fmt.Fprintf(os.Stderr, "bench: BENCH_SCALE=%q is not a positive number\n", v)
			os.Exit(2)
		}
	}
	return s
}

func commandLine() string {
	cmd := "go run ./hack/bench " + strings.Join(os.Args[1:], " ")
	if v := os.Getenv("BENCH_SCALE"); v != "" {
		cmd = "BENCH_SCALE=" + v + " " + cmd
	}
	return strings.TrimSpace(cmd)
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s ==> %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	started := time.Now()
	r := &report{opts: o, started: started}
	r.machine = describeMachine()
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	if err := os.Chdir(root); err != nil {
		return err
	}
	if !filepath.IsAbs(o.lockguard) {
		o.lockguard = filepath.Join(root, o.lockguard)
	}
	if _, err := os.Stat(o.lockguard); err != nil {
		return fmt.Errorf("lockguard binary: %w (run `make build`)", err)
	}

	if o.want("handler") {
		step("Handler benchmarks (go test -bench, ./webhook)")
		if r.handler, err = runHandlerBenchmarks(ctx, o); err != nil {
			return err
		}
	}
	cluster := o.want("webhook") || o.want("api") || o.want("window") || o.want("convergence") || o.want("memory")
	if cluster {
		if err := runCluster(ctx, o, r); err != nil {
			r.failure = err.Error()
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	if r.failure == "" && o.want("modes") {
		if err := runModes(ctx, o, r); err != nil {
			r.failure = err.Error()
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	if r.failure == "" && o.want("cascade") {
		if err := runCascade(ctx, o, r); err != nil {
			r.failure = err.Error()
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	if r.failure == "" && o.want("selectors") {
		if err := runSelectors(ctx, o, r); err != nil {
			r.failure = err.Error()
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	if r.failure == "" && o.want("scale") {
		if err := runScale(ctx, o, r); err != nil {
			r.failure = err.Error()
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
	r.took = time.Since(started)
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.out, []byte(r.markdown()), 0o644); err != nil {
		return err
	}
	step("Wrote %s in %s", o.out, r.took.Round(time.Second))
	if r.failure != "" {
		return fmt.Errorf("incomplete: %s", r.failure)
	}
	return nil
}

func runCluster(ctx context.Context, o options, r *report) error {
	var logs io.Writer
	if o.verbose {
		logs = os.Stderr
	}
	step("Starting etcd and kube-apiserver")
	c, err := measure.StartCluster(ctx, logs)
	if err != nil {
		return err
	}
	defer c.Stop()
	r.kubeVersion = c.Env.Version
	c.LockguardArgs = strings.Fields(o.args)
	cacheOnly := "--cache-only-decisions=true"

	// Phase 1: lockguard deciding from its cache alone.
	step("Idle memory: lockguard with no Lock")
	idle, lg, err := c.MeasureMemory(ctx, o.lockguard, cacheOnly)
	if err != nil {
		return err
	}
	r.memory = append(r.memory, idle)
	stopLockguard := func() {
		if lg != nil {
			lg.Stop()
			lg = nil
		}
	}
	defer stopLockguard()
	if err := c.InstallWebhook(ctx); err != nil {
		return err
	}
	modes := []struct {
		name string
		args []string
	}{{"cache-only", []string{cacheOnly}}, {"default", nil}}
	for k, mode := range modes {
		if k > 0 {
			stopLockguard()
			step("Restarting lockguard (%s)", mode.name)
			if lg, err = c.StartLockguard(o.lockguard, mode.args...); err != nil {
				return err
			}
			if _, err := lg.WaitReady(ctx); err != nil {
				return err
			}
			if err := lg.WaitWarm(ctx); err != nil {
				return err
			}
		}
		// A default-mode measurement in which the replica went cold
		// measured the API server's reads: the run fails.
		warm, err := lg.StayedWarm()
		if err != nil {
			return err
		}
		if o.want("webhook") {
			step("Webhook server over TLS (%s)", mode.name)
			// The default mode is measured warm: an allowed review reads
			// the API server only for a target with a pending Lock create
			// (internal/peers), which the benchmark's reviews never have.
			wo := measure.WebhookOptions{Rounds: 8, RoundTime: o.d(2*time.Second, 500*time.Millisecond), HalfTime: o.d(8*time.Second, 2*time.Second), Conns: 16, BodySize: 2048}
			res, err := c.BenchWebhook(ctx, lg, wo)
			if err != nil {
				return fmt.Errorf("webhook (%s): %w", mode.name, err)
			}
			r.webhook = append(r.webhook, modeResult[*measure.WebhookResult]{mode.name, res})
		}
		if o.want("api") {
			step("DELETE latency through the API server (%s)", mode.name)
			ao := measure.APILatencyOptions{Rounds: 4, SequentialRounds: 2, DeletesPerRound: o.n(500, 60), DeniedPerRound: o.n(100, 20), Clients: 16, Payload: 1024}
			res, err := c.BenchAPILatency(ctx, ao)
			if err != nil {
				return fmt.Errorf("API latency (%s): %w", mode.name, err)
			}
			r.api = append(r.api, modeResult[*measure.APILatencyResult]{mode.name, res})
		}
		if o.want("window") {
			step("Protection window (%s)", mode.name)
			res, err := c.BenchWindow(ctx, lg, "bench-window-"+mode.name, measure.WindowOptions{Iterations: o.n(1000, 100)})
			if err != nil {
				return fmt.Errorf("window (%s): %w", mode.name, err)
			}
			r.window = append(r.window, modeResult[*measure.WindowResult]{mode.name, res})
		}
		if err := warm(); err != nil {
			return fmt.Errorf("%s mode: %w", mode.name, err)
		}
	}

	// Phase 2: lockguard as deployed (default flags).
	if o.want("convergence") {
		if lg == nil {
			if lg, err = c.StartLockguard(o.lockguard); err != nil {
				return err
			}
			if _, err := lg.WaitReady(ctx); err != nil {
				return err
			}
		}
		step("Convergence: %d Locks in a burst, then %g/s", o.n(10000, 500), 100.0)
		res, err := c.BenchConvergence(ctx, lg, measure.ConvergenceOptions{
			Locks: o.n(10000, 500), Creators: 16, Workers: 4, Rate: 100, Steady: o.d(30*time.Second, 10*time.Second),
		})
		if err != nil {
			return fmt.Errorf("convergence: %w", err)
		}
		r.convergence = res
	}
	if o.want("memory") {
		// The template the seeded Locks copy, converged by the binary
		// under test (measure.GrowTemplate).
		if lg == nil {
			if lg, err = c.StartLockguard(o.lockguard); err != nil {
				return err
			}
			if _, err := lg.WaitReady(ctx); err != nil {
				return err
			}
		}
		step("A Lock and its Stack converged by lockguard, for the Locks seeded below to copy")
		template, err := c.ConvergedTemplate(ctx, "bench-mem")
		if err != nil {
			return fmt.Errorf("memory: %w", err)
		}
		stopLockguard()
		locks, _, err := c.CountObjects(ctx)
		if err != nil {
			return err
		}
		grown := 0 // Locks m-0… created in bench-mem
		grow := func(n int) error {
			step("Creating %d converged Locks and targets (lockguard stopped)", n)
			t := time.Now()
			// Every Lock create is admitted by lockguard (the peer
			// protocol, failurePolicy Fail): with lockguard stopped, its
			// webhook configuration is taken out while the Locks are
			// written, and put back before lockguard starts again.
			if err := c.UninstallWebhook(ctx); err != nil {
				return err
			}
			err := c.GrowLocks(ctx, template, "bench-mem", grown, n, 64)
			if ierr := c.InstallWebhook(ctx); err == nil {
				err = ierr
			}
			if err != nil {
				return err
			}
			grown += n
			r.growTook += time.Since(t)
			r.grown += n
			return nil
		}
		if mid := o.n(10000, 1000); locks < mid {
			if err := grow(mid - locks); err != nil {
				return err
			}
		}
		for _, top := range []int{0, o.n(100000, 10000)} {
			if top > 0 {
				if locks, _, err = c.CountObjects(ctx); err != nil {
					return err
				}
				if locks < top {
					if err := grow(top - locks); err != nil {
						return err
					}
				}
			}
			step("Memory and start-up with %d Locks", max(locks, top))
			p, l, err := c.MeasureMemory(ctx, o.lockguard)
			if err != nil {
				return err
			}
			l.Stop()
			r.memory = append(r.memory, p)
		}
		if o.baseline != "" {
			step("Start-up with %d Locks, side by side with %s", r.memory[len(r.memory)-1].Locks, o.baseline)
			if r.startups, err = startups(ctx, c, []string{o.baseline, o.lockguard}, 3); err != nil {
				return err
			}
		}
	}
	return nil
}

// startups starts each binary in turn, rounds times over, and returns the
// time each start took to ready, by binary.
func startups(ctx context.Context, c *measure.Cluster, binaries []string, rounds int) (map[string][]time.Duration, error) {
	out := map[string][]time.Duration{}
	for range rounds {
		for _, b := range binaries {
			lg, err := c.StartLockguard(b)
			if err != nil {
				return nil, err
			}
			readyCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			d, err := lg.WaitReady(readyCtx)
			cancel()
			lg.Stop()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", b, err)
			}
			out[b] = append(out[b], d)
		}
	}
	return out, nil
}
