package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// lockReadsTimeout bounds the API server's answer to the readiness
// check's list of Locks.
const lockReadsTimeout = 2 * time.Second

// lockReadsReady is the readiness check "lock-reads": whether the guards
// can read the Locks they decide from (issue 38: ready before the cache
// at scale). Ready once the Lock index has synced; before that, ready
// while live (the API server; nil with --cache-only-decisions, whose
// decisions need the index) answers a list of one Lock within
// lockReadsTimeout: until the index syncs, the guards read their Locks
// from it (webhook.ReasonUnsynced), never from less than it holds.
func lockReadsReady(synced func() bool, live webhook.LockLister) healthz.Checker {
	return func(req *http.Request) error {
		if synced() {
			return nil
		}
		if live == nil {
			return errors.New("the Lock cache has not synced (with --cache-only-decisions the guards decide from it alone)")
		}
		ctx, cancel := context.WithTimeout(req.Context(), lockReadsTimeout)
		defer cancel()
		if err := live.List(ctx, &lockv1alpha1.LockList{}, client.Limit(1)); err != nil {
			return fmt.Errorf("the Lock cache has not synced, and the API server's Locks cannot be read: %w", err)
		}
		return nil
	}
}
