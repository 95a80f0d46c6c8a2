//go:build chaos

package chaos

// The chaos run:
//
//	make chaos                       # 3 minutes of faults
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
// Clients, one per namespace, keep creating and deleting Locks and trying
// to delete locked and unlocked objects: directly, as dry runs, through
// another served version, by deletecollection and through garbage
// collection of an owner. Meanwhile the run SIGKILLs replicas (one, both,
// or the leader), restarts kube-apiserver (SIGTERM or SIGKILL), deletes
// the leader Lease, and rotates the serving certificate (a new key from the
// same CA, swapped in atomically as kubelet updates a Secret volume).
//
// The checker: every object the client saw locked (a Lock it saw created,
// and has not started to delete, before it sent the delete or saw the
// object) must never be deleted; a dry run must never be allowed. After the
// faults stop, every unlocked delete must go through, and every Lock's
// status and every lock annotation must be right within 30 seconds. The run
// prints its counts as its last lines.

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
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/manager"
)

// convergeWithin is how soon after the faults stop every Lock status and
// annotation must be right.
const convergeWithin = 30 * time.Second

// summary are the lines the run prints last.
var summary []string

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	out := strings.Join(summary, "\n")
	if out != "" {
		fmt.Println(out)
		if p := os.Getenv("LOCKGUARD_CHAOS_SUMMARY"); p != "" {
			_ = os.WriteFile(p, []byte(out+"\n"), 0o644)
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

// faultCounts counts the faults injected.
type faultCounts struct {
	replicaKills, leaderKills, outages, leaseDeletions atomic.Int64
	apiRestarts, apiKills                              atomic.Int64
	rotations, rotationsSeen                           atomic.Int64
	rotationLag                                        atomic.Int64 // slowest, ns
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
}

func TestChaos(t *testing.T) {
	duration := envDuration("LOCKGUARD_CHAOS_DURATION", 3*time.Minute)
	clients := envInt("LOCKGUARD_CHAOS_CLIENTS", 6)
	seed := uint64(time.Now().UnixNano())
	if s, err := strconv.ParseUint(os.Getenv("LOCKGUARD_CHAOS_SEED"), 10, 64); err == nil {
		seed = s
	}
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

	// lockguard's identity; InstallChart below gives it the chart's RBAC.
	saCfg, err := env.ServiceAccountConfig()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "lockguard.kubeconfig")
	if err := framework.WriteKubeconfig(saCfg, kubeconfig); err != nil {
		t.Fatal(err)
	}

	h := &harness{t: t, env: env, admin: admin, rng: rand.New(rand.NewPCG(seed, 1)), logf: logf}
	if h.ca, err = certs.NewAuthority("lockguard-chaos-ca", 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, _, err := h.ca.Issue(servingHosts, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Two replicas, each with a certificate volume of its own, restarted
	// like pods whenever their process exits, behind the front that the
	// chart's webhook configuration points at.
	certDirs := make([]string, 2)
	for i := range certDirs {
		certDirs[i] = filepath.Join(dir, fmt.Sprintf("certs-%d", i))
		if err := framework.ProjectSecret(certDirs[i], map[string][]byte{certs.CertName: certPEM, certs.KeyName: keyPEM}); err != nil {
			t.Fatal(err)
		}
	}
	set, err := framework.NewReplicaSet(&framework.LocalWebhook{CA: h.ca.CertPEM}, framework.ReplicaOptions{
		Binary: bin, Kubeconfig: kubeconfig, Dir: dir, Restart: true,
		CertDir: func(i int) string { return certDirs[i] },
	})
	if err != nil {
		t.Fatal(err)
	}
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
	report := func(format string, args ...any) {
		v.add(format, args...)
		logf("VIOLATION: "+format, args...)
	}
	workCtx, stopWork := context.WithCancel(ctx)
	var workers []*worker
	var working sync.WaitGroup
	for i := range clients {
		w := newWorker(i, admin, seed, &n, report, logf)
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

	// The faults.
	faultCtx, stopFaults := context.WithTimeout(ctx, duration)
	h.faults(faultCtx)
	stopFaults()
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
		for {
			problems, err := h.check(ctx, workers)
			if err == nil && len(problems) == 0 {
				converged <- convergence{after: time.Since(faultsStopped)}
				return
			}
			if err != nil {
				problems = append(problems, err.Error())
			}
			if time.Since(faultsStopped) > convergeWithin+30*time.Second {
				converged <- convergence{problems: problems}
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
	}()

	// Every unlocked delete goes through.
	settleCtx, stopSettle := context.WithTimeout(ctx, 90*time.Second)
	var stuck []string
	for _, w := range workers {
		stuck = append(stuck, w.settle(settleCtx)...)
	}
	stopSettle()
	for _, w := range workers {
		w.audit(ctx)
	}

	conv := <-converged
	convergedAfter, problems := conv.after, conv.problems

	h.bg.Wait() // The last rotation check.
	f := &h.f
	summary = []string{
		fmt.Sprintf("chaos: %s: Kubernetes %s, 2 lockguard replicas, %d clients, %s of faults, seed %d", time.Now().Format("2006-01-02"), env.Version, clients, duration, seed),
		fmt.Sprintf("chaos: faults: %d replica SIGKILLs, %d leader SIGKILLs, %d outages of both replicas, %d leader Lease deletions, %d kube-apiserver restarts (%d by SIGKILL), %d certificate rotations (%d served by every replica, slowest after %s)",
			f.replicaKills.Load(), f.leaderKills.Load(), f.outages.Load(), f.leaseDeletions.Load(), f.apiRestarts.Load(), f.apiKills.Load(), f.rotations.Load(), f.rotationsSeen.Load(), time.Duration(f.rotationLag.Load()).Round(100*time.Millisecond)),
		fmt.Sprintf("chaos: Locks created %d, deleted %d; lock annotations edited by hand %d; owner deletes cascading onto a locked child %d; dry runs %d; deletecollections %d; balancer connections %d (%d refused: no replica ready)",
			n.lockCreates.Load(), n.lockDeletes.Load(), n.annotations.Load(), n.gcCascades.Load(), n.dryRuns.Load(), n.collections.Load(), set.Front.Conns.Load(), set.Front.Refused.Load()),
		fmt.Sprintf("chaos: deletes of locked objects %d (%d sent the moment the Lock's create was answered), of unlocked objects %d (%d went through, %d denied by a Lock already deleted, slowest waited %s, %d still refused after the faults)",
			n.lockedTries.Load(), n.racedTries.Load(), n.unlockedTries.Load(), n.unlockedOK.Load(), n.staleDenials.Load(), time.Duration(n.slowestUnlock.Load()).Round(100*time.Millisecond), len(stuck)),
		fmt.Sprintf("chaos: converged %s after the faults stopped (bound %s)", convergedText(convergedAfter), convergeWithin),
		fmt.Sprintf("chaos: attempts %d", n.attempts.Load()),
		fmt.Sprintf("chaos: denials %d", n.denials.Load()),
		fmt.Sprintf("chaos: errors %d", n.errors.Load()),
		fmt.Sprintf("chaos: violations %d", n.violations.Load()),
	}

	for _, line := range v.all() {
		t.Errorf("violation: %s", line)
	}
	for _, s := range stuck {
		t.Errorf("unlocked delete never went through: %s", s)
	}
	if convergedAfter == 0 || convergedAfter > convergeWithin {
		for i, p := range problems {
			if i == 20 {
				t.Errorf("... and %d more", len(problems)-20)
				break
			}
			t.Errorf("not converged %s after the faults: %s", time.Since(faultsStopped).Round(time.Second), p)
		}
		if convergedAfter > convergeWithin {
			t.Errorf("converged only %s after the faults stopped, want within %s", convergedAfter.Round(100*time.Millisecond), convergeWithin)
		}
	}
	if n.attempts.Load() < 1000 {
		t.Errorf("only %d delete attempts; the run proves little", n.attempts.Load())
	}
}

func convergedText(d time.Duration) string {
	if d == 0 {
		return "NEVER"
	}
	return d.Round(100 * time.Millisecond).String()
}

// faults injects a fault every 3 to 8 seconds until ctx ends.
func (h *harness) faults(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(h.rng, 3*time.Second, 8*time.Second)):
		}
		switch r := h.rng.IntN(100); {
		case r < 25:
			rep := h.replicas[h.rng.IntN(len(h.replicas))]
			h.f.replicaKills.Add(1)
			delay := jitter(h.rng, 200*time.Millisecond, 3*time.Second)
			h.logf("fault: SIGKILL %s (back in %s)", rep.Name, delay.Round(100*time.Millisecond))
			rep.Kill(delay)
		case r < 40:
			h.killLeader()
		case r < 50:
			h.f.outages.Add(1)
			delay := jitter(h.rng, time.Second, 4*time.Second)
			h.logf("fault: SIGKILL both replicas (back in %s)", delay.Round(100*time.Millisecond))
			for _, rep := range h.replicas {
				rep.Kill(delay)
			}
		case r < 60:
			h.deleteLease(ctx)
		case r < 80:
			// A short grace period: kube-apiserver stops listening at once on
			// SIGTERM but waits for its watches to end, up to a minute.
			o := framework.RestartOptions{Kill: h.rng.IntN(3) == 0, Down: jitter(h.rng, 0, 3*time.Second), GracePeriod: 5 * time.Second}
			h.f.apiRestarts.Add(1)
			if o.Kill {
				h.f.apiKills.Add(1)
			}
			h.logf("fault: restart kube-apiserver (SIGKILL %v, down %s)", o.Kill, o.Down.Round(100*time.Millisecond))
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			began := time.Now()
			if err := h.env.RestartAPIServer(rctx, o); err != nil {
				h.t.Errorf("restarting kube-apiserver: %v", err)
			}
			cancel()
			h.logf("kube-apiserver back after %s", time.Since(began).Round(100*time.Millisecond))
		default:
			h.rotate()
		}
	}
}

// killLeader SIGKILLs the replica holding the leader Lease.
func (h *harness) killLeader() {
	for _, rep := range h.replicas {
		if leads, _ := rep.IsLeader(context.Background()); leads {
			h.f.leaderKills.Add(1)
			delay := jitter(h.rng, 200*time.Millisecond, 3*time.Second)
			h.logf("fault: SIGKILL the leader %s (back in %s)", rep.Name, delay.Round(100*time.Millisecond))
			rep.Kill(delay)
			return
		}
	}
	h.logf("fault: no leader to kill")
}

// deleteLease deletes the leader Lease, forcing a new election.
func (h *harness) deleteLease(ctx context.Context) {
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: framework.ServiceAccountNamespace, Name: manager.LeaderElectionID}}
	err := h.admin.Delete(ctx, lease)
	if err == nil {
		h.f.leaseDeletions.Add(1)
	}
	h.logf("fault: delete the leader Lease (%v)", err)
}

// servingHosts are the addresses the replicas' serving certificates are for.
var servingHosts = []string{"127.0.0.1"}

// rotate issues a new serving certificate and swaps it into each
// replica's certificate volume, a little apart, then checks in the
// background that every replica serves it.
func (h *harness) rotate() {
	certPEM, keyPEM, serial, err := h.ca.Issue(servingHosts, time.Hour)
	if err != nil {
		h.t.Errorf("issuing a certificate: %v", err)
		return
	}
	h.f.rotations.Add(1)
	h.logf("fault: rotate the serving certificate (serial %x...)", serial.Bytes()[:4])
	rotated := time.Now()
	for _, rep := range h.replicas {
		if err := framework.ProjectSecret(rep.CertDir(), map[string][]byte{certs.CertName: certPEM, certs.KeyName: keyPEM}); err != nil {
			h.t.Errorf("writing %s: %v", rep.CertDir(), err)
		}
		time.Sleep(jitter(h.rng, 0, time.Second))
	}
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		if err := h.waitServed(serial, 45*time.Second); err != nil {
			h.logf("rotation: %v", err)
			return
		}
		lag := time.Since(rotated)
		h.f.rotationsSeen.Add(1)
		for {
			cur := h.f.rotationLag.Load()
			if int64(lag) <= cur || h.f.rotationLag.CompareAndSwap(cur, int64(lag)) {
				break
			}
		}
	}()
}

// waitServed waits until every replica serves the certificate with serial
// (or a newer one).
func (h *harness) waitServed(serial *big.Int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := slices.Clone(h.replicas)
	for len(pending) > 0 {
		var left []*framework.Replica
		for _, rep := range pending {
			got, err := servedSerial(rep.Address(), h.ca)
			if err != nil || got.Cmp(serial) != 0 {
				left = append(left, rep)
			}
		}
		pending = left
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still not serving the certificate rotated %s ago", pending[0].Name, timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return nil
}

// check returns what is not (yet) as the contract says: each Lock's status
// from its target, and each target's lock annotation from the live Locks.
func (h *harness) check(ctx context.Context, workers []*worker) ([]string, error) {
	var problems []string
	for _, w := range workers {
		var locks lockv1alpha1.LockList
		if err := h.admin.List(ctx, &locks, client.InNamespace(w.ns)); err != nil {
			return nil, err
		}
		protecting := map[string][]string{} // kind/name -> Lock names
		for _, l := range locks.Items {
			if l.DeletionTimestamp != nil {
				continue
			}
			gv, err := schema.ParseGroupVersion(orDefault(l.Spec.TargetRef.APIVersion, lockv1alpha1.DefaultTargetAPIVersion))
			valid := err == nil && gv.Group == lockv1alpha1.Group && l.Spec.TargetRef.Kind != "Lock"
			want := lockStatus{Reason: lockv1alpha1.ReasonInvalidTarget, Ready: metav1.ConditionFalse}
			if valid {
				key := l.Spec.TargetRef.Kind + "/" + l.Spec.TargetRef.Name
				protecting[key] = append(protecting[key], l.Name)
				exists, err := h.exists(ctx, w.ns, l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name)
				if err != nil {
					return nil, err
				}
				want = lockStatus{Reason: lockv1alpha1.ReasonMissingReference, Ready: metav1.ConditionFalse}
				if exists {
					want = lockStatus{Active: true, Reason: lockv1alpha1.ReasonActive, Ready: metav1.ConditionTrue}
				}
			}
			if got := statusOf(&l); got != want {
				problems = append(problems, fmt.Sprintf("Lock %s/%s on %s %s: status %+v, want %+v", w.ns, l.Name, l.Spec.TargetRef.Kind, l.Spec.TargetRef.Name, got, want))
			}
		}
		for _, gvk := range []schema.GroupVersionKind{stackGVK, pgGVK} {
			var list metav1.PartialObjectMetadataList
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := h.admin.List(ctx, &list, client.InNamespace(w.ns)); err != nil {
				return nil, err
			}
			for _, o := range list.Items {
				names := protecting[gvk.Kind+"/"+o.Name]
				slices.Sort(names)
				want := strings.Join(names, ",")
				got, ok := o.Annotations[lockv1alpha1.LockedAnnotation]
				if got != want || (want == "" && ok) {
					problems = append(problems, fmt.Sprintf("%s %s/%s: annotation %q (set %v), want %q", gvk.Kind, w.ns, o.Name, got, ok, want))
				}
			}
		}
	}
	return problems, nil
}

type lockStatus struct {
	Active bool
	Ready  metav1.ConditionStatus
	Reason string
}

func statusOf(l *lockv1alpha1.Lock) lockStatus {
	s := lockStatus{Active: l.Status.Active}
	if c := meta.FindStatusCondition(l.Status.Conditions, lockv1alpha1.ConditionReady); c != nil {
		s.Ready, s.Reason = c.Status, c.Reason
	}
	return s
}

// exists reports whether the object of kind and name exists in ns.
func (h *harness) exists(ctx context.Context, ns, kind, name string) (bool, error) {
	o := &metav1.PartialObjectMetadata{}
	o.SetGroupVersionKind(schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: kind})
	err := h.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// jitter returns a random duration in [lo, hi).
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}
