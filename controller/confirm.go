package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// confirmTimeout bounds the read that confirms an allowed delete, so that
// the webhook answers (fail closed) before the API server's call to it
// times out (timeoutSeconds 5).
const confirmTimeout = 3 * time.Second

// ConfirmedFinder is the webhook's view of Locks: a Finder whose "no Lock"
// answers are confirmed by reading the namespace's Locks from the API
// server.
//
// An informer cache lags the API server: by the milliseconds a watch event
// takes to arrive, and by seconds while a watch reconnects (after a
// kube-apiserver restart, say), all the while reporting itself synced. A
// Lock whose create the client has already seen answered can be missing
// from it, and the delete that follows would go through. So a DELETE the
// cache would allow is decided again from a list of the namespace's Locks
// read from the API server (a consistent read); one the cache denies is
// denied at once (a stale cache only errs towards denying, until it
// catches up). Only allowed deletes pay for the read.
type ConfirmedFinder struct {
	cached *Finder
	live   client.Reader
}

// NewConfirmedFinder returns a ConfirmedFinder that answers from cached
// and confirms through live, a reader that reads the API server (the
// manager's APIReader).
func NewConfirmedFinder(cached *Finder, live client.Reader) *ConfirmedFinder {
	return &ConfirmedFinder{cached: cached, live: live}
}

// FindLocks returns the live Locks in obj's namespace that target the
// group, kind and name of obj: from the cache when it has any, otherwise
// from the API server. It returns an error when the cache has not synced
// or the API server cannot be read.
func (f *ConfirmedFinder) FindLocks(ctx context.Context, gk schema.GroupKind, obj types.NamespacedName) ([]lockv1alpha1.Lock, error) {
	locks, err := f.cached.FindLocks(ctx, gk, obj)
	if err != nil || len(locks) > 0 {
		return locks, err
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	var all lockv1alpha1.LockList
	if err := f.live.List(ctx, &all, client.InNamespace(obj.Namespace)); err != nil {
		return nil, fmt.Errorf("reading the Locks of namespace %s from the API server: %w", obj.Namespace, err)
	}
	want := TargetIndexValue(gk, obj.Name)
	for i := range all.Items {
		if slices.Contains(indexLockTarget(&all.Items[i]), want) {
			locks = append(locks, all.Items[i])
		}
	}
	if len(locks) > 0 {
		ctrl.LoggerFrom(ctx).V(1).Info("Lock cache lagged: the API server has Locks the cache has not seen yet", "kind", gk, "namespace", obj.Namespace, "name", obj.Name, "locks", len(locks))
	}
	return locks, nil
}
