package measure

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WindowOptions size the protection-window benchmark.
type WindowOptions struct {
	Iterations int
}

// WindowResult is the outcome of the protection-window benchmark.
type WindowResult struct {
	Iterations int
	Slipped    int // deletes that went through: the target was deleted while its Lock existed
	Denied     int
	// CacheDelay is, per iteration, the time from the Lock's create
	// returning to lockguard's cache holding the Lock (lockguard_locks,
	// polled). CacheUnseen counts iterations where it was not seen within 5s.
	CacheDelay  Latencies
	CacheUnseen int
	// DeleteLatency is the latency of the immediate deletes.
	DeleteLatency Latencies
}

// lockCount returns the number of Locks in lockguard's cache, from its
// lockguard_locks metric.
func (l *Lockguard) lockCount() (int, error) {
	m, err := l.Metrics()
	if err != nil {
		return 0, err
	}
	n := 0.0
	for k, v := range m {
		if strings.HasPrefix(k, "lockguard_locks{") {
			n += v
		}
	}
	return int(n), nil
}

// BenchWindow creates a Lock and immediately deletes its target,
// o.Iterations times, one after another, while polling lockguard's cache
// for the Lock. It deletes what it created.
func (c *Cluster) BenchWindow(ctx context.Context, lg *Lockguard, ns string, o WindowOptions) (*WindowResult, error) {
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return nil, err
	}
	target := func(i int) string { return fmt.Sprintf("w-%d", i) }
	if err := c.CreateAll(ctx, o.Iterations, 32, func(i int) client.Object { return Stack(ns, target(i), 256) }); err != nil {
		return nil, err
	}
	clients, err := c.clients(1)
	if err != nil {
		return nil, err
	}
	cl := clients[0]
	res := &WindowResult{Iterations: o.Iterations}
	for i := range o.Iterations {
		before, err := lg.lockCount()
		if err != nil {
			return nil, err
		}
		if err := cl.Create(ctx, LockOn(ns, target(i), target(i))); err != nil {
			return nil, fmt.Errorf("creating Lock %s: %w", target(i), err)
		}
		created := time.Now()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Since(created) < 5*time.Second {
				if n, err := lg.lockCount(); err == nil && n > before {
					res.CacheDelay.Add(time.Since(created))
					return
				}
			}
			res.CacheUnseen++
		}()
		start := time.Now()
		err = cl.Delete(ctx, Stack(ns, target(i), 0))
		res.DeleteLatency.Add(time.Since(start))
		switch {
		case err == nil:
			res.Slipped++
		case apierrors.IsForbidden(err):
			res.Denied++
		default:
			return nil, fmt.Errorf("deleting Stack %s right after locking it: %w", target(i), err)
		}
		wg.Wait()
	}
	// Clean up: the Locks, then their targets (denied until the cache has
	// seen the Locks go).
	if err := c.DeleteAll(ctx, o.Iterations, 32, func(i int) client.Object { return LockOn(ns, target(i), target(i)) }); err != nil {
		return nil, err
	}
	err = Parallel(ctx, o.Iterations, 32, func(ctx context.Context, i int) error {
		for attempt := 0; ; attempt++ {
			err := client.IgnoreNotFound(c.Client.Delete(ctx, Stack(ns, target(i), 0)))
			if err == nil || !apierrors.IsForbidden(err) || attempt > 100 {
				return err
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return res, err
}
