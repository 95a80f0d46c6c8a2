package transport

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestLazyDeadline: a lazyDeadline behaves as context.WithDeadline, whether
// or not its timer was made before it ended.
func TestLazyDeadline(t *testing.T) {
	t.Run("DeadlineWithoutTimer", func(t *testing.T) {
		ctx, cancel := withLazyDeadline(context.Background(), time.Now().Add(20*time.Millisecond))
		defer cancel()
		if err := ctx.Err(); err != nil {
			t.Fatalf("Err before the deadline = %v", err)
		}
		time.Sleep(30 * time.Millisecond)
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Err after the deadline, no timer made = %v, want DeadlineExceeded", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed after the deadline")
		}
		if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Cause = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("DeadlineWithTimer", func(t *testing.T) {
		ctx, cancel := withLazyDeadline(context.Background(), time.Now().Add(20*time.Millisecond))
		defer cancel()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed after the deadline")
		}
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err = %v, want DeadlineExceeded", err)
		}
	})
	t.Run("CancelBeforeUse", func(t *testing.T) {
		ctx, cancel := withLazyDeadline(context.Background(), time.Now().Add(time.Hour))
		cancel()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err after cancel = %v, want Canceled", err)
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Done open after cancel")
		}
	})
	t.Run("CancelReachesDerived", func(t *testing.T) {
		ctx, cancel := withLazyDeadline(context.Background(), time.Now().Add(time.Hour))
		child, stop := context.WithCancel(ctx)
		defer stop()
		cancel()
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a context derived from it not canceled with it")
		}
		if err := child.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("derived Err = %v, want Canceled", err)
		}
	})
	t.Run("ParentCanceled", func(t *testing.T) {
		parent, stop := context.WithCancel(context.Background())
		ctx, cancel := withLazyDeadline(parent, time.Now().Add(time.Hour))
		defer cancel()
		stop()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err after the parent's cancel = %v, want Canceled", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done open after the parent's cancel")
		}
	})
	t.Run("Deadline", func(t *testing.T) {
		early := time.Now().Add(time.Minute)
		parent, stop := context.WithDeadline(context.Background(), early)
		defer stop()
		ctx, cancel := withLazyDeadline(parent, early.Add(time.Hour))
		defer cancel()
		if d, ok := ctx.Deadline(); !ok || !d.Equal(early) {
			t.Errorf("Deadline = %v, %v; want the parent's, %v", d, ok, early)
		}
		type key struct{}
		valued := context.WithValue(context.Background(), key{}, "v")
		ctx, cancel = withLazyDeadline(valued, early)
		defer cancel()
		if d, ok := ctx.Deadline(); !ok || !d.Equal(early) {
			t.Errorf("Deadline = %v, %v; want %v", d, ok, early)
		}
		if v := ctx.Value(key{}); v != "v" {
			t.Errorf("Value = %v, want the parent's", v)
		}
	})
}

// TestLazyDeadlineNoTimer: a review that never waits makes no timer: its
// context costs one allocation, not context.WithDeadline's four.
func TestLazyDeadlineNoTimer(t *testing.T) {
	deadline := time.Now().Add(time.Hour)
	if n := testing.AllocsPerRun(100, func() {
		ctx, cancel := withLazyDeadline(context.Background(), deadline)
		if ctx.Err() != nil {
			t.Fatal("done early")
		}
		cancel()
	}); n > 2 {
		t.Errorf("%v allocations for a context never waited on, want at most 2", n)
	}
}
