package cachestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// The waits of an Informer's run: after a failed list or watch, firstWait
// doubling to maxWait, jittered up to twice that, back to firstWait once
// a watch has run for resetWait (client-go's reflector's); a watch asks
// the API server to end it after minWatch to twice that (client-go's).
const (
	firstWait = 800 * time.Millisecond
	maxWait   = 30 * time.Second
	resetWait = 2 * time.Minute
	minWatch  = 5 * time.Minute
)

// errStreamEnded is a first list's stream that ended before its last
// object.
var errStreamEnded = errors.New("the stream of the list ended before its end")

// errShortWatch is a watch the API server ended within a second, without
// an event.
var errShortWatch = errors.New("very short watch: the API server ended it within a second, without an event")

// RunWithContext lists and watches until ctx ends; a second call returns
// at once.
func (i *Informer) RunWithContext(ctx context.Context) {
	i.mu.Lock()
	if i.started {
		i.mu.Unlock()
		logr.FromContextOrDiscard(ctx).Info("Warning: the informer has already started")
		return
	}
	i.started = true
	transform, onError := i.transform, i.onError
	i.mu.Unlock()
	i.runCtx.Store(&ctx)
	defer i.stopped.Store(true)
	if onError == nil {
		onError = toolscache.DefaultWatchErrorHandler
	}
	if i.resync > 0 {
		go i.resyncEvery(ctx)
	}
	wait, list := i.firstWait, true
	for ctx.Err() == nil {
		began := time.Now()
		var err error
		list, err = i.listAndWatch(ctx, transform, list)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			onError(ctx, i.named, err)
		}
		if list && gone(err) {
			// The events since the store's resourceVersion are gone:
			// list again now, as client-go's reflector does.
			continue
		}
		if time.Since(began) >= resetWait {
			wait = i.firstWait
		}
		if !sleep(ctx, wait+time.Duration(rand.Int64N(int64(wait)))) {
			return
		}
		wait = min(2*wait, maxWait)
	}
}

// listAndWatch lists when list is set, then watches from the last
// resourceVersion until a watch fails; it returns whether the next call
// must list (a 410), and the error.
func (i *Informer) listAndWatch(ctx context.Context, transform toolscache.TransformFunc, list bool) (bool, error) {
	var w watch.Interface
	if list {
		var err error
		if w, err = i.list(ctx, transform); err != nil {
			return true, err
		}
	}
	for ctx.Err() == nil {
		if w == nil {
			var err error
			w, err = i.lw.WatchWithContext(ctx, metav1.ListOptions{
				ResourceVersion: i.LastSyncResourceVersion(), AllowWatchBookmarks: true, TimeoutSeconds: watchTimeout(),
			})
			if err != nil {
				return gone(err), err
			}
		}
		began := time.Now()
		n, err := i.consume(ctx, w, transform, nil)
		w = nil
		if err != nil {
			return gone(err), err
		}
		if n == 0 && time.Since(began) < time.Second && ctx.Err() == nil {
			// An API server that ends every watch at once would
			// otherwise be asked again at once, without end.
			return false, errShortWatch
		}
	}
	return false, nil
}

// list brings the store to the API server's objects now, telling the
// handlers: streamed where the API server can (returning the watch, which
// goes on), and otherwise, or if the stream fails, a page at a time.
func (i *Informer) list(ctx context.Context, transform toolscache.TransformFunc) (watch.Interface, error) {
	if i.stream {
		// No timeout of its own (the API server's default is 30 to 60
		// minutes): a stream that outlasts one ends before its last
		// object, and was listed again from the start, a page at a time,
		// beside a set of every name stored. Without a watch cache,
		// kube-apiserver streams from etcd: a million objects under load
		// outlasted the 5 to 10 minutes of a watch, again and again (the
		// scale benchmark's worst case, 2026-12-07).
		w, err := i.lw.WatchWithContext(ctx, metav1.ListOptions{
			SendInitialEvents: new(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
			AllowWatchBookmarks: true,
		})
		if err == nil {
			l := i.newListing()
			if _, err = i.consume(ctx, w, transform, l); err == nil && l.done {
				return w, nil
			}
			w.Stop()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
			// An API server that does not stream lists (WatchList is
			// off by default before 1.32) refuses the request so.
			i.stream = false
		}
		logr.FromContextOrDiscard(ctx).V(4).Info("The list could not be streamed: listing", "type", fmt.Sprintf("%T", i.objType), "err", err)
	}
	return nil, i.listPages(ctx, transform)
}

// listPages lists a page at a time, each page's objects applied as they
// come, from the API server's most recent objects (resourceVersion
// unset: consistent, and never older than what the store has).
func (i *Informer) listPages(ctx context.Context, transform toolscache.TransformFunc) error {
	l := i.newListing()
	rv, err := i.eachListed(ctx, metav1.ListOptions{Limit: i.pageSize}, func(obj runtime.Object) error {
		return l.add(obj, transform)
	})
	if err != nil {
		return err
	}
	return l.end(rv)
}

// eachListed lists with opts a page at a time, calling each with every
// item as its page comes, and returns the resourceVersion of the first
// page (the list's).
func (i *Informer) eachListed(ctx context.Context, opts metav1.ListOptions, each func(runtime.Object) error) (string, error) {
	rv := ""
	for {
		page, err := i.lw.ListWithContext(ctx, opts)
		if err != nil {
			return "", err
		}
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return "", fmt.Errorf("a page of the list: %w", err)
		}
		if rv == "" {
			rv = lm.GetResourceVersion()
		}
		// Each item a copy of its own (WithAlloc), so that what the
		// transform keeps of it does not hold the page's array.
		if err := meta.EachListItemWithAlloc(page, each); err != nil {
			return "", err
		}
		if opts.Continue = lm.GetContinue(); opts.Continue == "" {
			return rv, nil
		}
	}
}

// consume applies w's events until it ends: nil when it ends as the API
// server ends a watch, or when ctx ends. l is the listing a stream's
// initial events make, nil for a watch; once its end's bookmark has come
// (l.done), consume returns, leaving w to be consumed as a watch.
func (i *Informer) consume(ctx context.Context, w watch.Interface, transform toolscache.TransformFunc, l *listing) (events int, err error) {
	for ; ; events++ {
		var ev watch.Event
		var ok bool
		select {
		case <-ctx.Done():
			w.Stop()
			return events, nil
		case ev, ok = <-w.ResultChan():
		}
		if !ok {
			if l != nil {
				return events, errStreamEnded
			}
			return events, nil
		}
		switch ev.Type {
		case watch.Error:
			w.Stop()
			return events, apierrors.FromObject(ev.Object)
		case watch.Bookmark:
			m, err := meta.Accessor(ev.Object)
			if err != nil {
				w.Stop()
				return events, fmt.Errorf("a bookmark without metadata: %w", err)
			}
			if l != nil {
				if m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
					return events, l.end(m.GetResourceVersion())
				}
				continue
			}
			i.store.Bookmark(m.GetResourceVersion())
			i.setRV(m.GetResourceVersion())
		case watch.Added, watch.Modified:
			if l != nil {
				if err := l.add(ev.Object, transform); err != nil {
					w.Stop()
					return events, err
				}
				continue
			}
			o, err := i.apply(ev.Object, transform, false)
			if err != nil {
				w.Stop()
				return events, err
			}
			i.setRV(o.GetResourceVersion())
		case watch.Deleted:
			obj, err := i.transformed(ev.Object, transform)
			if err != nil {
				w.Stop()
				return events, err
			}
			if err := i.remove(obj); err != nil {
				w.Stop()
				return events, err
			}
			if m, err := meta.Accessor(obj); err == nil {
				i.setRV(m.GetResourceVersion())
			}
		}
	}
}

// transformed returns obj through transform (nil: obj).
func (i *Informer) transformed(obj runtime.Object, transform toolscache.TransformFunc) (any, error) {
	if transform == nil {
		return obj, nil
	}
	t, err := transform(obj)
	if err != nil {
		return nil, fmt.Errorf("transforming a %T: %w", obj, err)
	}
	return t, nil
}

// listing is a list being applied: the names it listed, when the store
// held objects as it began (nil for the first list, into an empty store:
// nothing can be gone).
type listing struct {
	inf     *Informer
	initial bool
	listed  map[[2]string]struct{}
	done    bool
}

// newListing begins a list.
func (i *Informer) newListing() *listing {
	l := &listing{inf: i, initial: !i.synced.Load()}
	if i.store.len() > 0 {
		l.listed = map[[2]string]struct{}{}
	}
	return l
}

// add applies a listed object.
func (l *listing) add(obj runtime.Object, transform toolscache.TransformFunc) error {
	o, err := l.inf.apply(obj, transform, l.initial)
	if err != nil {
		return err
	}
	if l.listed != nil {
		l.listed[[2]string{o.GetNamespace(), o.GetName()}] = struct{}{}
	}
	return nil
}

// end ends a list at resourceVersion rv: the objects stored that it did
// not list are deleted (their handlers told of a tombstone), and the
// informer has synced.
func (l *listing) end(rv string) error {
	i := l.inf
	if l.listed != nil {
		for _, obj := range i.store.List() {
			o := obj.(metav1.Object)
			if _, ok := l.listed[[2]string{o.GetNamespace(), o.GetName()}]; ok {
				continue
			}
			key := storeKey(o.GetNamespace(), o.GetName())
			if err := i.remove(toolscache.DeletedFinalStateUnknown{Key: key, Obj: o}); err != nil {
				return err
			}
		}
	}
	i.store.Bookmark(rv)
	i.setRV(rv)
	l.done = true
	if !i.synced.Load() {
		if i.onSynced != nil {
			i.onSynced()
		}
		i.synced.Store(true)
		close(i.syncedCh)
	}
	return nil
}

// resyncEvery resyncs the handlers that take resyncs every resync period
// until ctx ends.
func (i *Informer) resyncEvery(ctx context.Context) {
	t := time.NewTicker(i.resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if i.HasSynced() {
				i.resyncAll()
			}
		}
	}
}

// gone reports whether err says the resourceVersion asked for is too old
// (410) or too new for the API server: the informer must list again.
func gone(err error) bool {
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || isTooLargeResourceVersion(err)
}

// isTooLargeResourceVersion reports whether err is the API server's
// "Too large resource version" (its cache behind the version asked for).
func isTooLargeResourceVersion(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// watchTimeout is a watch's timeout: minWatch to twice that.
func watchTimeout() *int64 {
	s := int64(minWatch.Seconds() * (1 + rand.Float64()))
	return &s
}

// sleep waits d, and reports false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
