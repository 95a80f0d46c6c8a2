package measure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
)

// CascadeResult is what MeasureCascade measured: the cascade guard's
// (docs/contract.md rule 6) decision time for an owner of many dependents, and
// the memory of the metadata caches it keeps on every replica.
type CascadeResult struct {
	// Descendants is how many Stacks the owner owns.
	Descendants int
	// Rounds is how many dry-run DELETEs each median is of.
	Rounds int
	// Leaf, Owner and Locked are medians of server-side dry-run DELETEs
	// through the API server and lockguard's webhook, interleaved: a Stack
	// that owns nothing (allowed), the owner with no locked descendant
	// (allowed, after the whole walk), and the owner once its last
	// descendant is locked (denied).
	Leaf, Owner, Locked time.Duration
	// HeapOff and HeapDeny are the smallest go_memstats_heap_inuse_bytes
	// of a replica that does not lead, with --cascade-guard=Off (no
	// metadata caches on such a replica) and Deny, over the same objects
	// (Objects of the group's kinds in the cluster); GOGC=25.
	HeapOff, HeapDeny int64
	Objects           int
}

// PerObject is the heap the metadata caches and the owner index cost per
// object of the group, on a replica that does not lead.
func (r *CascadeResult) PerObject() float64 {
	return float64(r.HeapDeny-r.HeapOff) / float64(max(r.Objects, 1))
}

// MeasureCascade creates an owner Stack with n dependent Stacks in a
// namespace of its own, holds the leader Lease so that the lockguard
// started does not lead (its target watches stay off: only the cascade
// guard's metadata caches hold the objects), and measures binary's memory
// with the cascade guard off and on, then the decision times with it on.
func (c *Cluster) MeasureCascade(ctx context.Context, binary string, n, rounds int) (*CascadeResult, error) {
	const ns = "bench-cascade"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		return nil, err
	}
	owner := Stack(ns, "owner", 256)
	if err := c.Client.Create(ctx, owner); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	if err := c.Client.Get(ctx, client.ObjectKeyFromObject(owner), owner); err != nil {
		return nil, err
	}
	if err := c.Client.Create(ctx, Stack(ns, "leaf", 256)); client.IgnoreAlreadyExists(err) != nil {
		return nil, err
	}
	ref := metav1.OwnerReference{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID(), BlockOwnerDeletion: ptr.To(true)}
	if err := Parallel(ctx, n, 16, func(ctx context.Context, i int) error {
		s := Stack(ns, fmt.Sprintf("d-%d", i), 256)
		s.SetOwnerReferences([]metav1.OwnerReference{ref})
		return retry(ctx, func() error { return client.IgnoreAlreadyExists(c.Client.Create(ctx, s)) })
	}); err != nil {
		return nil, fmt.Errorf("creating %d dependents: %w", n, err)
	}
	if err := c.holdLease(ctx); err != nil {
		return nil, err
	}
	r := &CascadeResult{Descendants: n, Rounds: rounds}
	_, stacks, err := c.CountObjects(ctx)
	if err != nil {
		return nil, err
	}
	r.Objects = stacks
	restore := setenv("GOGC", "25")
	defer restore()
	for _, mode := range []string{"Off", "Deny"} {
		lg, heap, err := c.idleHeap(ctx, binary, "--cascade-guard="+mode)
		if err != nil {
			return nil, fmt.Errorf("lockguard --cascade-guard=%s: %w", mode, err)
		}
		if mode == "Off" {
			r.HeapOff = heap
			lg.Stop()
			continue
		}
		r.HeapDeny = heap
		err = c.cascadeTimes(ctx, r, ns, n)
		lg.Stop()
		if err != nil {
			return nil, err
		}
	}
	return r, nil
}

// cascadeTimes measures r's decision times against the running lockguard.
func (c *Cluster) cascadeTimes(ctx context.Context, r *CascadeResult, ns string, n int) (err error) {
	warned := &warningCount{}
	cfg := rest.CopyConfig(c.Config)
	cfg.WarningHandler = warned
	cl, err := client.New(cfg, client.Options{Scheme: c.Scheme})
	if err != nil {
		return err
	}
	dryRun := func(name string) (time.Duration, error) {
		start := time.Now()
		err := cl.Delete(ctx, Stack(ns, name, 0), client.DryRunAll)
		return time.Since(start), err
	}
	// The owner index has synced once the owner's delete is allowed
	// without the warning of a walk that could not finish.
	if err := waitFor(ctx, func() error {
		before := warned.n.Load()
		if _, err := dryRun("owner"); err != nil {
			return err
		}
		if warned.n.Load() != before {
			return errors.New("allowed with a warning: the owner index has not synced")
		}
		return nil
	}); err != nil {
		return fmt.Errorf("waiting for the owner's dry-run delete to be allowed: %w", err)
	}
	synced := warned.n.Load()
	defer func() {
		if n := warned.n.Load() - synced; n > 0 && err == nil {
			err = fmt.Errorf("%d warnings during the measurement: a walk did not finish", n)
		}
	}()
	var leaf, owner, locked []time.Duration
	for range r.Rounds {
		for _, name := range []string{"leaf", "owner"} {
			d, err := dryRun(name)
			if err != nil {
				return fmt.Errorf("dry-run delete of Stack %s: %w", name, err)
			}
			if name == "leaf" {
				leaf = append(leaf, d)
			} else {
				owner = append(owner, d)
			}
		}
	}
	last := fmt.Sprintf("d-%d", n-1)
	lock := LockOn(ns, "keep-"+last, last)
	if err := c.Client.Create(ctx, lock); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	defer func() { _ = c.Client.Delete(context.Background(), lock) }()
	if err := waitFor(ctx, func() error {
		if _, err := dryRun("owner"); !apierrors.IsForbidden(err) {
			return fmt.Errorf("the owner's dry-run delete: %v, want Forbidden", err)
		}
		return nil
	}); err != nil {
		return err
	}
	for range r.Rounds {
		d, err := dryRun("owner")
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("dry-run delete of the owner with a locked descendant: %v, want Forbidden", err)
		}
		locked = append(locked, d)
	}
	r.Leaf, r.Owner, r.Locked = MedianDuration(leaf), MedianDuration(owner), MedianDuration(locked)
	return nil
}

// idleHeap starts binary with args, waits until it is ready and idle, and
// returns it running with the smallest heap in use of 10 samples.
func (c *Cluster) idleHeap(ctx context.Context, binary string, args ...string) (*Lockguard, int64, error) {
	lg, err := c.StartLockguard(binary, args...)
	if err != nil {
		return nil, 0, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if _, err := lg.WaitReady(readyCtx); err != nil {
		lg.Stop()
		return nil, 0, err
	}
	if err := lg.waitIdle(5 * time.Minute); err != nil {
		lg.Stop()
		return nil, 0, err
	}
	var heap []int64
	for range 10 {
		m, err := lg.Memory()
		if err != nil {
			lg.Stop()
			return nil, 0, err
		}
		heap = append(heap, m.HeapInuse)
		time.Sleep(300 * time.Millisecond)
	}
	return lg, slices.Min(heap), nil
}

// holdLease makes the leader Lease held by another identity for an hour,
// so that the lockguard the benchmark starts never leads.
func (c *Cluster) holdLease(ctx context.Context) error {
	now := metav1.NowMicro()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: framework.ServiceAccountNamespace, Name: manager.LeaderElectionID},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("bench-cascade-holder"), LeaseDurationSeconds: ptr.To(int32(3600)),
			AcquireTime: &now, RenewTime: &now,
		},
	}
	err := c.Client.Create(ctx, lease)
	if apierrors.IsAlreadyExists(err) {
		var cur coordinationv1.Lease
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(lease), &cur); err != nil {
			return err
		}
		cur.Spec = lease.Spec
		return c.Client.Update(ctx, &cur)
	}
	return err
}

// waitFor polls fn until it succeeds, for at most a minute.
func waitFor(ctx context.Context, fn func() error) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var err error
	for {
		if err = fn(); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// MedianDuration is the median of ds (the upper one of an even count; 0
// for none).
func MedianDuration(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// setenv sets an environment variable of this process (which the
// lockguard processes it starts inherit) and returns what restores it.
func setenv(key, value string) func() {
	old, had := os.LookupEnv(key)
	_ = os.Setenv(key, value)
	return func() {
		if had {
			_ = os.Setenv(key, old)
		} else {
			_ = os.Unsetenv(key)
		}
	}
}

// warningCount counts the API server's warnings.
type warningCount struct{ n atomic.Int64 }

// HandleWarningHeader counts one warning.
func (w *warningCount) HandleWarningHeader(int, string, string) { w.n.Add(1) }
