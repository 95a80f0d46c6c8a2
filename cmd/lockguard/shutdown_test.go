package main

import (
	"context"
	"testing"
	"time"
)

func TestDelayDone(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	ctx := delayDone(parent, 200*time.Millisecond)
	cancel()
	start := time.Now()
	select {
	case <-ctx.Done():
		t.Fatal("delayDone(...) was cancelled with its parent; want it cancelled after the delay")
	case <-time.After(100 * time.Millisecond):
	}
	select {
	case <-ctx.Done():
		if d := time.Since(start); d < 200*time.Millisecond {
			t.Errorf("delayDone(...) was cancelled after %s; want at least 200ms", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("delayDone(...) was not cancelled within 5s of its parent")
	}

	if got := delayDone(parent, 0); got != parent {
		t.Error("delayDone(ctx, 0) should return ctx itself")
	}
}
