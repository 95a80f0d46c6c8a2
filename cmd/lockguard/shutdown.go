package main

import (
	"context"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// delayDone returns a context that is cancelled delay after ctx is. Kubernetes
// sends SIGTERM while it removes the terminating Pod from its Services'
// endpoints; serving on for a while lets the API server stop sending admission
// requests to this replica before its webhook server stops. It stands in for a
// preStop sleep, which the distroless image cannot run (no sleep binary) and
// which Kubernetes only offers as a lifecycle action from 1.30.
func delayDone(ctx context.Context, delay time.Duration) context.Context {
	if delay <= 0 {
		return ctx
	}
	delayed, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		<-ctx.Done()
		ctrl.Log.WithName("setup").Info("Shutdown requested; serving until the endpoints are removed", "delay", delay)
		time.Sleep(delay)
		cancel()
	}()
	return delayed
}
