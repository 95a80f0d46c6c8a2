package readmodel

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// How long, and how often, a cache's list or watch is retried while the
// API server is coming back, before its informer sees the error.
const (
	restartRetryFor   = 30 * time.Second
	restartRetryFirst = 250 * time.Millisecond
	restartRetryMax   = 2 * time.Second
)

// NewInformerFunc returns the cache's cache.Options.NewInformer: informers
// with a list and watch that ride out an API server restart.
//
// An informer backs off after each failed list or watch: 0.8 s doubling
// to 30 s, jittered up to twice that, and reset only every 2 minutes
// (client-go's reflector's defaults, which cachestore.Informer keeps). A
// restart fails several lists in a row (connection refused while it is
// down, then 403 while its authorizer warms), so after two or three
// restarts within two minutes an informer
// could wait a minute after the API server was back before it listed, and
// the reconciler saw a new Lock or a namespace's label that late. Retried
// here, the restart costs the informer one step at most (its watch ends).
//
// An informer of objects with metadata (every informer of lockguard's
// cache) is a cachestore.Informer: its first list, streamed or a page at a
// time, goes into its store object by object, each transformed (by the
// transform the cache sets) as it arrives, and nothing else holds it
// (issue 38). Any other (the cache has none) is client-go's.
//
// With keys (the transform's LabelKeys), a metadata-only informer lists
// and watches once the Lock informer has synced, and is one of those a
// new label key refreshes; the Lock informer tells keys when it has
// synced.
func NewInformerFunc(transform toolscache.TransformFunc, keys *LabelKeys) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		if _, ok := obj.(metav1.Object); !ok {
			return toolscache.NewSharedIndexInformer(steadyListWatch(lw, nil), obj, resync, indexers)
		}
		var gate <-chan struct{}
		_, partial := obj.(*metav1.PartialObjectMetadata)
		if keys != nil && partial {
			gate = keys.synced
		}
		inf := cachestore.NewInformer(steadyListWatch(lw, gate), obj, resync, indexers)
		// The cache sets its transform (the same) before it runs it.
		_ = inf.SetTransform(transform)
		switch _, lock := obj.(*lockv1alpha1.Lock); {
		case gate != nil:
			keys.watchInformer(inf)
		case keys != nil && lock:
			_ = inf.OnSynced(keys.lockInformerSynced)
		}
		return inf
	}
}

// steadyListWatch wraps lw so that a list or watch failing for a reason
// that passes when the API server is back is retried (transientAPIError),
// for up to restartRetryFor, before the error is returned; and, with a
// gate, so that none begins before the gate is closed.
func steadyListWatch(lw toolscache.ListerWatcher, gate <-chan struct{}) toolscache.ListerWatcher {
	s := &steadyLW{
		gate:  gate,
		lw:    toolscache.ToListerWatcherWithContext(lw),
		for_:  restartRetryFor,
		first: restartRetryFirst,
		max:   restartRetryMax,
		sleep: sleepCtx,
		now:   time.Now,
	}
	if w, ok := lw.(watchListSemantics); ok {
		return &steadyLWSemantics{steadyLW: s, semantics: w}
	}
	return s
}

// watchListSemantics is how a ListerWatcher tells a reflector it cannot
// stream its initial list (client-go's watchlist package).
type watchListSemantics interface{ IsWatchListSemanticsUnSupported() bool }

// steadyLWSemantics is a steadyLW that keeps what the wrapped
// ListerWatcher says of streamed lists.
type steadyLWSemantics struct {
	*steadyLW
	semantics watchListSemantics
}

// IsWatchListSemanticsUnSupported reports what the wrapped ListerWatcher does.
func (s *steadyLWSemantics) IsWatchListSemanticsUnSupported() bool {
	return s.semantics.IsWatchListSemanticsUnSupported()
}

// steadyLW retries lw's transient failures; see steadyListWatch.
type steadyLW struct {
	lw               toolscache.ListerWatcherWithContext
	gate             <-chan struct{} // nil: none
	for_, first, max time.Duration
	sleep            func(context.Context, time.Duration) bool
	now              func() time.Time
}

// List is ListWithContext without a context.
//
// Deprecated: the informer calls ListWithContext.
func (s *steadyLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return s.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context.
//
// Deprecated: the informer calls WatchWithContext.
func (s *steadyLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return s.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists, once the gate is open, retrying transient
// failures.
func (s *steadyLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return retryTransient(ctx, s, func() (runtime.Object, error) { return s.lw.ListWithContext(ctx, opts) })
}

// WatchWithContext starts a watch, once the gate is open, retrying
// transient failures.
func (s *steadyLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return retryTransient(ctx, s, func() (watch.Interface, error) { return s.lw.WatchWithContext(ctx, opts) })
}

// wait returns once the gate is open (nil), or ctx's error if it ends
// first.
func (s *steadyLW) wait(ctx context.Context) error {
	if s.gate == nil {
		return nil
	}
	select {
	case <-s.gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// retryTransient calls f until it succeeds, fails for a reason that is not
// transient, s.for_ has passed, or ctx ends; it returns f's last answer.
// The wait doubles from s.first to s.max; a 429's Retry-After, if longer,
// is honoured.
func retryTransient[T any](ctx context.Context, s *steadyLW, f func() (T, error)) (T, error) {
	deadline := s.now().Add(s.for_)
	wait := s.first
	for {
		v, err := f()
		if err == nil || !transientAPIError(err) {
			return v, err
		}
		d := wait
		if secs, ok := apierrors.SuggestsClientDelay(err); ok && time.Duration(secs)*time.Second > d {
			d = time.Duration(secs) * time.Second
		}
		if deadline.Sub(s.now()) < d || !s.sleep(ctx, d) {
			return v, err
		}
		wait = min(2*wait, s.max)
	}
}

// transientAPIError reports whether err is one an API server that is
// restarting gives, and that passes once it is back: the connection refused
// or reset, a 429, 500, 503 or timeout, or a 403 while its authorizer has
// not yet loaded the RBAC objects (lockguard's permissions are fixed by its
// install, so a 403 that lasts is returned after restartRetryFor).
func transientAPIError(err error) bool {
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsForbidden(err)
}

// sleepCtx waits d, and reports false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
