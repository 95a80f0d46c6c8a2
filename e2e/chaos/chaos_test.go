//go:build chaos

package chaos

// The chaos run:
//
//	make chaos                       # 3 minutes of faults, recorded in docs/reliability.md
//	make chaos-short                 # the short run of make test, recorded nowhere
//	LOCKGUARD_CHAOS_DURATION=10m make chaos
//
// A local control plane (etcd, kube-apiserver, kube-controller-manager for
// the garbage collector) runs two lockguard replicas (the built binary, as
// its ServiceAccount with the chart's RBAC, leader election on) behind a TCP
// round-robin balancer that stands in for the webhook's Service: the
// chart's ValidatingWebhookConfiguration points at the
// balancer, as it points at a Service in a cluster. Registering two
// webhooks instead would make every delete need both replicas' approval,
// which is not how a Deployment behind a Service behaves.
//
// Clients, one per namespace, keep creating and deleting Locks (by
// targetRef and by selector, CanNotDelete and ReadOnly), moving objects in
// and out of the selectors, updating objects that ReadOnly Locks freeze,
// and trying to delete locked and unlocked objects in every way of the table in
// kinds_test.go: directly, as dry runs, through another served version, by
// deletecollection (real and dry run) and through garbage collection of an
// owner. Meanwhile the run SIGKILLs replicas (one, both, or the leader),
// restarts kube-apiserver (SIGTERM or SIGKILL), deletes the leader Lease,
// and rotates the serving certificate (a new key from the same CA, swapped
// in atomically as kubelet updates a Secret volume); the first faults are
// one of each kind, in random order, so that even a short run has them
// all.
//
// The checker: every object the client saw locked (a Lock it saw created,
// and has not started to delete, before it sent the delete or saw the
// object) must never be deleted; a request that includes it, dry run or
// not, must be denied; a dry run must delete nothing. Before lockguard is
// installed, the checker proves that it sees a violation of every kind
// (selfTest). After the faults stop, every unlocked delete must go
// through, every Lock's status and every lock annotation must be right
// within 30 seconds, every certificate rotation must have been served by
// every replica, and every delete kind must have been denied at least
// once, and an update of a frozen object of some update kind (while one
// has not, the faults go on past the duration, by at most half of it:
// coverage_test.go). The
// run prints its counts as its last lines and, with
// LOCKGUARD_CHAOS_RECORD, writes them into that file (record_test.go).
//
// The files, by what they hold: this one the run (TestChaos) and its
// summary; faults_test.go the faults; selftest_test.go the checker's
// self-test; workload_test.go the clients (worker) and what they know;
// locks_test.go their Lock creates and deletes; deletes_test.go their
// deletes and how each answer is judged; updates_test.go their updates
// under ReadOnly Locks; observe_test.go the invariant check on every read
// of an object; convergence_test.go the check once the faults stop;
// coverage_test.go what a run must have exercised;
// bigdeletes_test.go the deletes that remove many objects at once;
// optin_test.go the client on opted-in PersistentVolumeClaims (rule 21)
// and clusterlocks_test.go the client on ClusterLocks and the namespaces
// they name (rule 22).

import (
	"context"
	"flag"
	"fmt"
	"math/big"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
)

const (
	// convergeWithin is how soon after the faults stop every Lock status
	// and annotation must be right.
	convergeWithin = 30 * time.Second
	// servedWithin is how soon every replica must serve a rotated
	// certificate.
	servedWithin = 45 * time.Second
	// The faults come one every faultMin to faultMax.
	faultMin, faultMax = 3 * time.Second, 8 * time.Second
	// selfTestWithin bounds the checker's self-test.
	selfTestWithin = 2 * time.Minute
	// apiGrace is kube-apiserver's grace period between SIGTERM and
	// SIGKILL on a restart: it stops listening at once on SIGTERM but
	// waits for its watches to end, up to a minute.
	apiGrace = 5 * time.Second
)

// run is what the run reports: the summary lines it prints last, and
// what record writes next to them.
var run struct {
	summary []string
	version string
}

func TestMain(m *testing.M) {
	flag.Parse()
	rec := startRecord()
	code := m.Run()
	out := strings.Join(run.summary, "\n")
	if out != "" {
		fmt.Println(out)
		if p := os.Getenv("LOCKGUARD_CHAOS_SUMMARY"); p != "" {
			_ = os.WriteFile(p, []byte(out+"\n"), 0o644)
		}
		if err := rec.write(code == 0, run.version, run.summary); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: recording the run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func envDuration(key string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(key)); err == nil && d > 0 {
		return d
	}
	return def
}

func envInt(key string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(key)); err == nil && n > 0 {
		return n
	}
	return def
}

// harness is the running system under test.
type harness struct {
	t        *testing.T
	env      *framework.Env
	admin    client.Client
	replicas []*framework.Replica
	ca       *certs.Authority
	rng      *rand.Rand
	f        faultCounts
	logf     func(string, ...any)
	bg       sync.WaitGroup
	start    time.Time

	serialsMu sync.Mutex
	serials   []*big.Int // every serving certificate issued, oldest first

	apiDown *restarts // the workers' record of kube-apiserver's restarts
}

func TestChaos(t *testing.T) {
	duration := envDuration("LOCKGUARD_CHAOS_DURATION", 3*time.Minute)
	clients := envInt("LOCKGUARD_CHAOS_CLIENTS", 6)
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("LOCKGUARD_CHAOS_SEED"), 10, 64); err == nil {
		seed = s
	}
	framework.Logs() // controller-runtime's own clients log nowhere unless LOCKGUARD_KUBE_LOGS=1
	start := time.Now()
	logf := func(format string, args ...any) {
		t.Logf("%6.1fs "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}

	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	env := framework.StartForTest(t, framework.Options{
		ControllerManager: true,
		CRDDirs:           framework.CRDDirs(root),
	})
	run.version = env.Version
	dir, err := os.MkdirTemp("", "lockguard-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("lockguard logs kept in %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	bin, err := framework.BuildLockguard(dir)
	if err != nil {
		t.Fatal(err)
	}
	scheme, err := manager.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(env.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The checker proves it is not blind, before lockguard exists.
	selfTestLine := selfTest(ctx, t, admin, env.Config, client.Options{Scheme: scheme}, seed, clients, logf)

	// lockguard's identity; InstallChart below gives it the chart's RBAC.
	saCfg, err := env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saCfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	h := &harness{t: t, env: env, admin: admin, rng: rand.New(rand.NewPCG(seed, 1)), logf: logf, start: start}
	if h.ca, err = certs.NewAuthority("lockguard-chaos-ca", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, serial, err := h.ca.Issue(servingHosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	h.serials = append(h.serials, serial)
	// Two replicas, each with a certificate volume of its own, restarted
	// like pods whenever their process exits, behind the front that the
	// chart's webhook configuration points at.
	certDirs := make([]string, 2)
	for i := range certDirs {
		certDirs[i] = filepath.Join(dir, fmt.Sprintf("certs-%d", i))
		if err := framework.ProjectSecret(certDirs[i], map[string][]byte{certs.CertName: certPEM, certs.KeyName: keyPEM, certs.CAName: h.ca.CertPEM}); err != nil {
			t.Fatal(err)
		}
	}
	set, err := framework.NewReplicaSet(&framework.LocalWebhook{CA: h.ca.CertPEM}, framework.ReplicaOptions{
		Binary: bin, Kubeconfig: kubeconfig, Dir: dir, Restart: true,
		CertDir: func(i int) string { return certDirs[i] },
		// PVCs opted in (optin_test.go): the flag, and the chart's
		// protect.resources below.
		Args: []string{"--protect-resource=persistentvolumeclaims"},
	})
	if err != nil {
		t.Fatal(err)
	}
	set.Webhook.SetJSON = append(set.Webhook.SetJSON, framework.ProtectSet(optInResources))
	defer func() { _ = set.Stop() }()
	if _, err := set.Webhook.InstallChart(ctx, admin); err != nil {
		t.Fatal(err)
	}
	readyCtx, cancelReady := context.WithTimeout(ctx, 2*time.Minute)
	err = set.Scale(readyCtx, 2)
	cancelReady()
	if err != nil {
		t.Fatal(err)
	}
	h.replicas = set.Replicas()
	logf("setup done: Kubernetes %s, lockguard replicas on %s and %s behind 127.0.0.1:%d; %d clients, %s of faults, seed %d",
		env.Version, h.replicas[0].Address(), h.replicas[1].Address(), set.Front.Port(), clients, duration, seed)

	// The workload.
	var n counts
	var v violations
	h.apiDown = &n.apiDown
	report := func(kind deleteKind, msg string) {
		v.add(kind, msg)
		logf("VIOLATION [%s]: %s", kind, msg)
	}
	workCtx, stopWork := context.WithCancel(ctx)
	var workers []*worker
	var working sync.WaitGroup
	for i := range clients {
		w := newWorker(fmt.Sprintf("chaos-%d", i), i, admin, seed, &n, report, logf)
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}}); err != nil {
			t.Fatal(err)
		}
		w.ensureTargets(ctx)
		workers = append(workers, w)
		working.Add(1)
		go func() {
			defer working.Done()
			w.run(workCtx)
		}()
	}
	// The opt-in worker, on PVCs (optin_test.go), after the warm-up Lock
	// (see warmUpLock).
	opt := newOptInWorker("chaos-pvc", clients, admin, seed, &n, report, logf)
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opt.ns}}); err != nil {
		t.Fatal(err)
	}
	if warmUp() {
		if err := createWarmUpLock(ctx, admin, opt.ns); err != nil {
			t.Fatal(err)
		}
	}
	opt.ensureTargets(ctx)
	working.Add(1)
	go func() {
		defer working.Done()
		opt.run(workCtx)
	}()
	cw := newClusterWorker("chaos-cl", admin, seed, &n, report, logf)
	cw.ensure(ctx)
	working.Add(1)
	go func() {
		defer working.Done()
		cw.run(workCtx)
	}()
	big, err := newBigWorker("chaos-big", env.Config, client.Options{Scheme: scheme}, seed, &n, report, logf, true)
	if err != nil {
		t.Fatal(err)
	}
	working.Add(1)
	go func() {
		defer working.Done()
		big.run(workCtx)
	}()

	// The faults, past duration while the run has not yet exercised every
	// kind (coverage_test.go).
	extended := h.faultsUntilCovered(ctx, &n, duration)
	faultsStopped := time.Now()
	stopWork()
	working.Wait()
	logf("faults stopped; settling")

	// Every Lock status and annotation converges (settling below deletes
	// only objects no Lock protects).
	type convergence struct {
		after    time.Duration
		problems []string
	}
	converged := make(chan convergence, 1)
	go func() {
		pastBound := false
		for {
			problems, err := h.check(ctx, workers, opt)
			if err == nil && len(problems) == 0 {
				converged <- convergence{after: time.Since(faultsStopped)}
				return
			}
			if err != nil {
				problems = append(problems, err.Error())
			}
			if !pastBound && time.Since(faultsStopped) > convergeWithin {
				// What was still wrong at the bound, for a run that
				// converges late: the log then says what lagged.
				pastBound = true
				for _, p := range firstOf(problems, 20) {
					logf("not converged at %s: %s", convergeWithin, p)
				}
			}
			if time.Since(faultsStopped) > convergeWithin+30*time.Second {
				converged <- convergence{problems: problems}
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()

	// Every unlocked delete goes through.
	// Each client settles on its own, so that one whose deletes stay
	// refused does not take the others' time.
	settleCtx, stopSettle := context.WithTimeout(ctx, 90*time.Second)
	left := make([][]string, len(workers)+2)
	var settling sync.WaitGroup
	for i, w := range workers {
		settling.Go(func() { left[i] = w.settle(settleCtx) })
	}
	settling.Go(func() { left[len(workers)] = opt.settle(settleCtx) })
	settling.Go(func() { left[len(workers)+1] = cw.settle(settleCtx) })
	settling.Wait()
	stopSettle()
	stuck := slices.Concat(left...)
	// The namespaces and the CRD no Lock holds back go, within the
	// namespace controller's time.
	settleCtx, stopSettle = context.WithTimeout(ctx, 2*time.Minute)
	stuck = append(stuck, big.settle(settleCtx)...)
	stopSettle()

	conv := <-converged
	convergedAfter, problems := conv.after, conv.problems

	// The last look at every object, after everything else (the garbage
	// collector keeps retrying the locked children of deleted owners).
	for _, w := range append(slices.Clip(workers), opt) {
		auditCtx, stopAudit := context.WithTimeout(ctx, 30*time.Second)
		for !w.audit(auditCtx) && auditCtx.Err() == nil {
			time.Sleep(250 * time.Millisecond)
		}
		if auditCtx.Err() != nil {
			t.Errorf("the last check of %s's objects: the API server did not answer", w.ns)
		}
		stopAudit()
	}
	auditCtx, stopAudit := context.WithTimeout(ctx, 30*time.Second)
	for !cw.audit(auditCtx) && auditCtx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
	}
	if auditCtx.Err() != nil {
		t.Errorf("the last check of the ClusterLocks' namespaces: the API server did not answer")
	}
	stopAudit()
	auditCtx, stopAudit = context.WithTimeout(ctx, 30*time.Second)
	for !big.audit(auditCtx) && auditCtx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
	}
	if auditCtx.Err() != nil {
		t.Errorf("the last check of the locked ChaosWidget: the API server did not answer")
	}
	stopAudit()

	h.bg.Wait() // The last rotation check.
	f := &h.f
	slowest := "none served"
	if f.rotationsSeen.Load() > 0 {
		slowest = time.Duration(f.rotationLag.Load()).Round(100 * time.Millisecond).String()
	}
	run.summary = []string{
		fmt.Sprintf("chaos: %s: Kubernetes %s, 2 lockguard replicas, %d clients (each alone in a namespace with %d Stacks and %d PostgresClusters owned by them), %s of faults (one every %s to %s)%s, seed %d",
			time.Now().UTC().Format("2006-01-02"), env.Version, clients, stacksPerClient, pgsPerClient, duration, faultMin, faultMax, extended.text(), seed),
		selfTestLine,
		fmt.Sprintf("chaos: faults: %d replica SIGKILLs, %d leader SIGKILLs, %d outages of both replicas, %d leader Lease deletions, %d kube-apiserver restarts (%d by SIGKILL, the others by SIGTERM with %s of grace), %d certificate rotations (%d served by every replica, slowest after %s; %d not served within %s)",
			f.replicaKills.Load(), f.leaderKills.Load(), f.outages.Load(), f.leaseDeletions.Load(), f.apiRestarts.Load(), f.apiKills.Load(), apiGrace,
			f.rotations.Load(), f.rotationsSeen.Load(), slowest, f.rotationsUnserved.Load(), servedWithin),
		fmt.Sprintf("chaos: Locks created %d, deleted %d; lock annotations edited by hand %d; balancer connections %d (%d refused: no replica ready)",
			n.lockCreates.Load(), n.lockDeletes.Load(), n.annotations.Load(), set.Front.Conns.Load(), set.Front.Refused.Load()),
		fmt.Sprintf("chaos: objects that went after their Lock's create was answered but before the Lock protected them (a delete admitted before the Lock existed, completed after; not a violation) %d",
			n.lateDeletes.Load()),
		fmt.Sprintf("chaos: Locks with a selector (on %s, never the empty one) %d, with level ReadOnly %d; objects relabelled in or out of selectors %d",
			setLabel, n.selectorLocks.Load(), n.readOnlyLocks.Load(), n.relabels.Load()),
		fmt.Sprintf("chaos: Locks with an expiresAt %s to %s after their create %d (%d expired while the client held them; %d requests they protected when sent were answered after they expired: either answer right), in Audit %d (a refusal naming one is a violation)",
			minExpiry, maxExpiry, n.expiringLocks.Load(), n.expiredLocks.Load(), n.expiredInFlight.Load(), n.auditLocks.Load()),
		fmt.Sprintf("chaos: break-glass LockExceptions created %d (for DELETE, %s to %s); deletes of locked objects they let through %d, refused while one lived %d (its create's answer lost, it expired in flight, or it owed the delete its passage while kube-apiserver was restarting and lockguard could not confirm it: counted, not judged; an allowed delete no exception explains, and a refusal one owed otherwise, are violations)",
			n.exceptions.Load(), exceptionMin, exceptionMax, n.exceptionUsed.Load(), n.exceptionRefused.Load()),
		fmt.Sprintf("chaos: updates of objects under no ReadOnly Lock %d (%d refused by a Lock already gone); under a ReadOnly Lock not yet read in force or an object not yet labelled %d (%d refused; either answer is right)",
			n.updateFree.Load(), n.updateStale.Load(), n.updatePending.Load(), n.updatePendingDenied.Load()),
	}
	run.summary = append(run.summary, kindTable(&n)...)
	run.summary = append(run.summary, big.summary(), optInSummary(opt), cw.summary())
	run.summary = append(run.summary,
		fmt.Sprintf("chaos: requests that would delete only unlocked objects %d (%d went through, %d denied by a Lock already deleted, %d denied for a locked dependent they would cascade to, slowest waited %s, %d still refused after the faults)",
			n.unlockedTries.Load(), n.unlockedOK.Load(), n.staleDenials.Load(), n.cascadeDenials.Load(), time.Duration(n.slowestUnlock.Load()).Round(100*time.Millisecond), len(stuck)),
		fmt.Sprintf("chaos: converged %s after the faults stopped (bound %s)", convergedText(convergedAfter), convergeWithin),
		fmt.Sprintf("chaos: attempts %d", n.attempts()),
		fmt.Sprintf("chaos: denials %d", n.denials()),
		fmt.Sprintf("chaos: errors %d", n.errors()),
		fmt.Sprintf("chaos: violations %d", n.violations()),
	)

	for _, line := range v.all() {
		t.Errorf("violation: %s", line)
	}
	for _, s := range stuck {
		t.Errorf("unlocked delete never went through: %s", s)
	}
	if convergedAfter == 0 || convergedAfter > convergeWithin {
		for _, p := range firstOf(problems, 20) {
			t.Errorf("not converged %s after the faults: %s", time.Since(faultsStopped).Round(time.Second), p)
		}
		if convergedAfter > convergeWithin {
			t.Errorf("converged only %s after the faults stopped, want within %s", convergedAfter.Round(100*time.Millisecond), convergeWithin)
		}
	}
	// A run that exercised too little proves little: a floor on the
	// requests, and every kind denied at least once (the cascade, whose
	// denial the client cannot see, at least sent onto a locked child).
	for _, g := range coverageGaps(&n, duration) {
		t.Errorf("%s (after %s more of faults)", g, extended.over.Round(100*time.Millisecond))
	}
}

// kindTable returns the summary's table of the counts by delete kind.
func kindTable(n *counts) []string {
	out := []string{fmt.Sprintf("chaos: %-32s %8s %8s %8s %8s %8s %10s %12s %12s", "delete kind", "sent", "locked", "denied", "allowed", "errors", "violations", "selector", "ReadOnly")}
	for k := range deleteKind(len(kinds)) {
		c := &n.byKind[k]
		if k == kindNone && c.violations.Load() == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("chaos:   %-30s %8d %8d %8d %8d %8d %10d %12s %12s", k, c.sent.Load(), c.locked.Load(), c.denied.Load(), c.allowed.Load(), c.errors.Load(), c.violations.Load(),
			fmt.Sprintf("%d/%d", c.selectorDenied.Load(), c.bySelector.Load()),
			fmt.Sprintf("%d/%d", c.readOnlyDenied.Load(), c.byReadOnly.Load())))
	}
	return append(out,
		"chaos:   (locked: sent while a Lock the client had seen protected an object it would delete; an owner delete's denied and allowed are its own answer, the locked child must survive either way;",
		"chaos:    for the update kinds, sent while a ReadOnly Lock the client had seen, and read in force for its generation, covered an object that carried the read-only label;",
		"chaos:    selector and ReadOnly: denied/locked of the locked requests with a selector Lock, a ReadOnly Lock, among the Locks)")
}

func convergedText(d time.Duration) string {
	if d == 0 {
		return "NEVER"
	}
	return d.Round(100 * time.Millisecond).String()
}

// firstOf returns the first n of lines, and then a line saying how many
// more there are.
func firstOf(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(slices.Clip(lines[:n]), fmt.Sprintf("... and %d more", len(lines)-n))
}
