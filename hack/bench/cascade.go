package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/navique/lockguard/hack/bench/measure"
)

// runCascade measures the cascade guard (docs/contract.md rule 6) on a control
// plane of its own: the decision time for an owner of many dependents and
// the memory of the metadata caches every replica keeps for it.
func runCascade(ctx context.Context, o options, r *report) error {
	c, err := sectionCluster(ctx, o, "Cascade guard")
	if err != nil {
		return err
	}
	defer c.Stop()
	n := o.n(10000, 1000)
	step("Cascade guard: an owner of %d Stacks; lockguard off and on, not leading", n)
	res, err := c.MeasureCascade(ctx, o.lockguard, n, o.n(50, 10))
	if err != nil {
		return fmt.Errorf("cascade: %w", err)
	}
	r.cascade = res
	return nil
}

// sectionCluster starts a control plane of a section's own (etcd and
// kube-apiserver, logging to stderr with -v), with lockguard's webhook
// configuration installed and -args for the lockguard it will start.
func sectionCluster(ctx context.Context, o options, section string) (*measure.Cluster, error) {
	var logs io.Writer
	if o.verbose {
		logs = os.Stderr
	}
	step("%s: starting etcd and kube-apiserver", section)
	c, err := measure.StartCluster(ctx, logs)
	if err != nil {
		return nil, err
	}
	if err := c.InstallWebhook(ctx); err != nil {
		_ = c.Stop()
		return nil, err
	}
	c.LockguardArgs = strings.Fields(o.args)
	return c, nil
}

// cascadeSection writes the cascade guard's measurements.
func (r *report) cascadeSection(w writer) {
	c := r.cascade
	if c == nil {
		return
	}
	w("## Cascade guard (contract rule 6)\n\n")
	w("A control plane of its own: an owner Stack with %d dependent Stacks (ownerReferences, one level), and a Stack that owns nothing. The lockguard binary runs while another identity holds the leader Lease, so that it never leads: its reconciler's watches stay off, and only the cascade guard's metadata caches (readmodel.OwnerIndex, on every replica) hold the objects.\n\n", c.Descendants)
	w("Server-side dry-run DELETEs through kube-apiserver and lockguard's webhook, %d of each, interleaved (medians):\n\n", c.Rounds)
	w("| delete | median | ÷ leaf |\n|---|---|---|\n")
	w("| a Stack that owns nothing (allowed) | %s | 1.00 |\n", c.Leaf.Round(10*time.Microsecond))
	w("| the owner, no descendant locked (allowed after walking all %d) | %s | %.2f |\n", c.Descendants, c.Owner.Round(10*time.Microsecond), ratio(c.Owner, c.Leaf))
	w("| the owner, its last descendant locked (denied) | %s | %.2f |\n", c.Locked.Round(10*time.Microsecond), ratio(c.Locked, c.Leaf))
	w("\nMemory, `go_memstats_heap_inuse_bytes` (smallest of 10 samples once idle, GOGC=25) of that replica over %d objects of the group: %s with `--cascade-guard=Off`, %s with `Deny`: **%.0f bytes per object** for the metadata caches and the owner index.\n\n",
		c.Objects, mib(c.HeapOff), mib(c.HeapDeny), c.PerObject())
}
