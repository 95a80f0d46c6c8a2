//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/navique/lockguard/certs"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
)

// A fault is one kind of fault the run injects.
type fault int

const (
	faultReplica   fault = iota // SIGKILL a replica
	faultLeader                 // SIGKILL the leader
	faultOutage                 // SIGKILL both replicas
	faultLease                  // delete the leader Lease
	faultAPIServer              // restart kube-apiserver
	faultRotate                 // rotate the serving certificate
	numFaults
)

// faultWeights are the odds of each fault after the first round.
var faultWeights = [numFaults]int{25, 15, 10, 10, 20, 20}

// restarts are the times kube-apiserver was being restarted: from the
// restart's start until it served again. Safe for concurrent use.
type restarts struct {
	mu      sync.Mutex
	windows [][2]time.Time // an unfinished one ends at the zero time
}

// begin records a restart that began at began, and returns the function
// that records when it ended.
func (r *restarts) begin(began time.Time) func(time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i := len(r.windows)
	r.windows = append(r.windows, [2]time.Time{began})
	return func(back time.Time) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.windows[i][1] = back
	}
}

// during reports whether a restart overlapped [from, to].
func (r *restarts) during(from, to time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, w := range r.windows {
		if !w[0].After(to) && (w[1].IsZero() || !w[1].Before(from)) {
			return true
		}
	}
	return false
}

// faultCounts counts the faults injected.
type faultCounts struct {
	replicaKills, leaderKills, outages, leaseDeletions atomic.Int64
	apiRestarts, apiKills                              atomic.Int64
	rotations, rotationsSeen, rotationsUnserved        atomic.Int64
	rotationLag                                        atomic.Int64 // slowest, ns
}

// faults injects a fault every faultMin to faultMax until ctx ends: the
// first ones one of each kind, in random order, then at random.
func (h *harness) faults(ctx context.Context) {
	first := h.rng.Perm(int(numFaults))
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-time.After(jitter(h.rng, faultMin, faultMax)):
		}
		var f fault
		if i < len(first) {
			f = fault(first[i])
		} else {
			f = pickFault(h.rng)
		}
		switch f {
		case faultReplica:
			rep := h.replicas[h.rng.IntN(len(h.replicas))]
			h.f.replicaKills.Add(1)
			delay := jitter(h.rng, 200*time.Millisecond, 3*time.Second)
			h.logf("fault: SIGKILL %s (back in %s)", rep.Name, delay.Round(100*time.Millisecond))
			rep.Kill(delay)
		case faultLeader:
			h.killLeader()
		case faultOutage:
			h.f.outages.Add(1)
			delay := jitter(h.rng, time.Second, 4*time.Second)
			h.logf("fault: SIGKILL both replicas (back in %s)", delay.Round(100*time.Millisecond))
			for _, rep := range h.replicas {
				rep.Kill(delay)
			}
		case faultLease:
			h.deleteLease(ctx)
		case faultAPIServer:
			o := framework.RestartOptions{Kill: h.rng.IntN(3) == 0, Down: jitter(h.rng, 0, 3*time.Second), GracePeriod: apiGrace}
			h.f.apiRestarts.Add(1)
			if o.Kill {
				h.f.apiKills.Add(1)
			}
			h.logf("fault: restart kube-apiserver (SIGKILL %v, down %s)", o.Kill, o.Down.Round(100*time.Millisecond))
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			began := time.Now()
			end := h.apiDown.begin(began)
			if err := h.env.RestartAPIServer(rctx, o); err != nil {
				h.t.Errorf("restarting kube-apiserver: %v", err)
			}
			end(time.Now())
			cancel()
			h.logf("kube-apiserver back after %s", time.Since(began).Round(100*time.Millisecond))
		case faultRotate:
			h.rotate()
		}
	}
}

// pickFault picks a fault by faultWeights.
func pickFault(rng *rand.Rand) fault {
	total := 0
	for _, w := range faultWeights {
		total += w
	}
	r := rng.IntN(total)
	for f, w := range faultWeights {
		if r < w {
			return fault(f)
		}
		r -= w
	}
	return faultReplica
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
// background that every replica serves it (or a newer one) within
// servedWithin; one that does not fails the run.
func (h *harness) rotate() {
	certPEM, keyPEM, serial, err := h.ca.Issue(servingHosts, time.Hour)
	if err != nil {
		h.t.Errorf("issuing a certificate: %v", err)
		return
	}
	h.serialsMu.Lock()
	h.serials = append(h.serials, serial)
	gen := len(h.serials) - 1
	h.serialsMu.Unlock()
	h.f.rotations.Add(1)
	h.logf("fault: rotate the serving certificate (rotation %d, serial %x...)", gen, serial.Bytes()[:4])
	rotated := time.Now()
	for _, rep := range h.replicas {
		if err := framework.ProjectSecret(rep.CertDir(), map[string][]byte{certs.CertName: certPEM, certs.KeyName: keyPEM, certs.CAName: h.ca.CertPEM}); err != nil {
			h.t.Errorf("writing %s: %v", rep.CertDir(), err)
		}
		time.Sleep(jitter(h.rng, 0, time.Second))
	}
	h.bg.Add(1)
	go func() {
		defer h.bg.Done()
		if err := h.waitServed(gen, servedWithin); err != nil {
			h.f.rotationsUnserved.Add(1)
			h.logf("rotation %d: %v", gen, err)
			h.t.Errorf("certificate rotation %d (serial %x..., %s into the run) was not served: %v", gen, serial.Bytes()[:4], rotated.Sub(h.start).Round(100*time.Millisecond), err)
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

// generation returns the index in h.serials of the certificate with
// serial, -1 for one the run never issued.
func (h *harness) generation(serial *big.Int) int {
	h.serialsMu.Lock()
	defer h.serialsMu.Unlock()
	return slices.IndexFunc(h.serials, func(s *big.Int) bool { return s.Cmp(serial) == 0 })
}

// waitServed waits until every replica serves the certificate of
// generation gen or a newer one (a later rotation may overtake it).
func (h *harness) waitServed(gen int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pending := slices.Clone(h.replicas)
	last := map[string]string{}
	for {
		var left []*framework.Replica
		for _, rep := range pending {
			got, err := servedSerial(rep.Address(), h.ca)
			switch {
			case err != nil:
				last[rep.Name] = err.Error()
				left = append(left, rep)
			case h.generation(got) < gen:
				last[rep.Name] = fmt.Sprintf("serving rotation %d (serial %x...)", h.generation(got), got.Bytes()[:4])
				left = append(left, rep)
			}
		}
		pending = left
		if len(pending) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not serving it (or a newer one) %s after the rotation: last %s", pending[0].Name, timeout, last[pending[0].Name])
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// jitter returns a random duration in [lo, hi).
func jitter(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// TestRestartsDuring: a request overlaps a restart of kube-apiserver when
// it was sent before the restart ended and answered after it began; a
// restart not yet ended overlaps everything after its start.
func TestRestartsDuring(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1000+int64(s), 0) }
	var r restarts
	end := r.begin(at(10))
	if !r.during(at(5), at(12)) || !r.during(at(50), at(60)) || r.during(at(1), at(9)) {
		t.Errorf("an unfinished restart from 10 s: during(5, 12), during(50, 60) want true, during(1, 9) want false")
	}
	end(at(20))
	for _, c := range []struct {
		from, to int
		want     bool
	}{{1, 9, false}, {1, 10, true}, {12, 15, true}, {20, 25, true}, {21, 25, false}, {5, 30, true}} {
		if got := r.during(at(c.from), at(c.to)); got != c.want {
			t.Errorf("a restart from 10 s to 20 s: during(%d, %d) = %v; want %v", c.from, c.to, got, c.want)
		}
	}
}
