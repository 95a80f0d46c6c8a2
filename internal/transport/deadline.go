package transport

import (
	"context"
	"sync"
	"time"
)

// lazyDeadline is context.WithDeadline(parent, deadline) whose timer is
// made only when something waits on it or derives from it (Done, Value):
// most reviews are decided from the cache and never do (issue 38: the
// timer, its context and its cancel function were about 3% of the webhook
// server's CPU under load, four allocations per review). Err needs no
// timer: it reads the clock. Until made, it is canceled by stop alone.
type lazyDeadline struct {
	parent   context.Context
	deadline time.Time

	mu       sync.Mutex
	ctx      context.Context // made by started; nil until then
	cancel   context.CancelFunc
	canceled bool // stop was called
}

var _ context.Context = (*lazyDeadline)(nil)

// withLazyDeadline returns parent with deadline, and the function that
// cancels it, as context.WithDeadline does.
func withLazyDeadline(parent context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	c := &lazyDeadline{parent: parent, deadline: deadline}
	return c, c.stop
}

// started returns the context c stands for, made on first use.
func (c *lazyDeadline) started() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ctx == nil {
		c.ctx, c.cancel = context.WithDeadline(c.parent, c.deadline)
		if c.canceled {
			c.cancel()
		}
	}
	return c.ctx
}

// stop cancels c (its CancelFunc).
func (c *lazyDeadline) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.canceled = true
	if c.cancel != nil {
		c.cancel()
	}
}

// Deadline returns the earlier of c's deadline and its parent's.
func (c *lazyDeadline) Deadline() (time.Time, bool) {
	if d, ok := c.parent.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

// Done returns the channel closed when c is done, making its timer.
func (c *lazyDeadline) Done() <-chan struct{} { return c.started().Done() }

// Err returns why c is done, nil while it is not: as the context it
// stands for would, without making it.
func (c *lazyDeadline) Err() error {
	c.mu.Lock()
	ctx, canceled := c.ctx, c.canceled
	c.mu.Unlock()
	switch {
	case ctx != nil:
		return ctx.Err()
	case canceled:
		return context.Canceled
	}
	if err := c.parent.Err(); err != nil {
		return err
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value returns the value of the context c stands for, which it makes:
// the context package finds the cancellation of a context through Value,
// for context.Cause and for the contexts derived from c.
func (c *lazyDeadline) Value(key any) any { return c.started().Value(key) }
