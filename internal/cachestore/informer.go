package cachestore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgofeatures "k8s.io/client-go/features"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// Informer is a client-go SharedIndexInformer of lockguard's own, whose
// lists and watch events go straight into its Store (issue 38).
//
// client-go's informer holds a first list twice over before its store
// has it: streamed, in the reflector's temporary store (a map of
// "namespace/name" keys); listed, in the list itself; and then in its
// FIFO's replacement (a set of every key, the replaced objects). At a
// million objects that was about 100 MB of the start's peak of about 300
// (benchmarks.md section 9, run AK's live profiles). An Informer applies
// each object to the Store as it arrives, transformed, and keeps nothing
// else of the list: on its first list, into an empty Store, not even the
// names listed; on a relist, the names listed, to delete what is gone.
//
// Its handlers are told of each change in the informer's goroutine, as
// the Store tells its observers (Store.observeEach): no notification buffer.
// A handler added once objects are stored is told of them first, as adds
// of the initial list, while the informer waits. A handler must not wait.
//
// Its watch resumes from the last resourceVersion it saw after any error
// but a 410 (Gone), where client-go's reflector lists again; it lists
// again on a 410.
type Informer struct {
	lw       toolscache.ListerWatcherWithContext
	objType  runtime.Object
	store    *Store
	resync   time.Duration
	pageSize int64
	stream   bool // the first list may be streamed (WatchList)
	// firstWait is the wait after a first failed list or watch.
	firstWait time.Duration
	// named is a reflector that never runs, for a watch error handler's
	// sake: it reads its name and type.
	named *toolscache.Reflector

	mu        sync.Mutex // guards the fields below it up to deliver
	started   bool
	transform toolscache.TransformFunc
	onError   toolscache.WatchErrorHandlerWithContext

	// deliver is held while a change is applied to the store and its
	// handlers told, and while a handler is added and told of the stored
	// objects: each handler sees the changes in order, after its adds.
	deliver   sync.Mutex
	resyncers []*registration // handlers that take resyncs; under deliver

	synced   atomic.Bool
	syncedCh chan struct{}
	onSynced func() // OnSynced's; under mu until started
	stopped  atomic.Bool
	rv       atomic.Pointer[string]
	// runCtx is the context of its run, once it runs (RefreshNamespace).
	runCtx atomic.Pointer[context.Context]
}

var _ toolscache.SharedIndexInformer = (*Informer)(nil)

// InformerPageSize is how many objects an Informer's list asks for at a
// time where the API server does not stream lists: client-go's pager's.
const InformerPageSize = 500

// NewInformer returns an Informer of objType's objects from lw, in a
// Store with indexers, telling the handlers that ask for it of every
// object again each resync (0: never).
func NewInformer(lw toolscache.ListerWatcher, objType runtime.Object, resync time.Duration, indexers toolscache.Indexers) *Informer {
	stream := clientgofeatures.FeatureGates().Enabled(clientgofeatures.WatchListClient) &&
		!watchlist.DoesClientNotSupportWatchListSemantics(lw)
	return &Informer{
		lw:        toolscache.ToListerWatcherWithContext(lw),
		objType:   objType,
		store:     New(indexers),
		resync:    resync,
		pageSize:  InformerPageSize,
		stream:    stream,
		firstWait: firstWait,
		syncedCh:  make(chan struct{}),
		named:     toolscache.NewReflectorWithOptions(lw, objType, nil, toolscache.ReflectorOptions{TypeDescription: fmt.Sprintf("%T", objType)}),
	}
}

// registration is a handler of an Informer.
type registration struct {
	inf    *Informer
	h      toolscache.ResourceEventHandler
	stop   func()
	resync bool
}

// HasSynced reports whether the handler has been told of the informer's
// initial list: the informer's sync, or its add if it came after.
func (r *registration) HasSynced() bool { return r.inf.HasSynced() }

// HasSyncedChecker is the informer's.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker { return r.inf.HasSyncedChecker() }

// AddEventHandler adds h, resynced at the informer's period.
func (i *Informer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds h, resynced if resync is not 0.
func (i *Informer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions adds h, telling it of the objects stored
// now, as adds of the initial list, before it returns. A handler that
// asks for resyncs (no ResyncPeriod, or one not 0) is resynced at the
// informer's period, whatever it asked: client-go's shortest is a
// second, and lockguard's cache gives every handler the informer's.
func (i *Informer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if i.stopped.Load() {
		return nil, fmt.Errorf("handler %v was not added to shared informer because it has stopped already", h)
	}
	r := &registration{inf: i, h: h, resync: i.resync > 0 && (o.ResyncPeriod == nil || *o.ResyncPeriod != 0)}
	i.deliver.Lock()
	defer i.deliver.Unlock()
	// Nothing changes the store while deliver is held.
	r.stop = i.store.observeEach(h, func(obj any) { h.OnAdd(obj, true) })
	if r.resync {
		i.resyncers = append(i.resyncers, r)
	}
	return r, nil
}

// RemoveEventHandler removes the handler of reg.
func (i *Informer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	r, ok := reg.(*registration)
	if !ok || r.inf != i {
		return fmt.Errorf("the registration %v is not of this informer", reg)
	}
	i.deliver.Lock()
	defer i.deliver.Unlock()
	r.stop()
	for k, x := range i.resyncers {
		if x == r {
			i.resyncers = append(i.resyncers[:k:k], i.resyncers[k+1:]...)
			break
		}
	}
	return nil
}

// GetStore returns the Store.
func (i *Informer) GetStore() toolscache.Store { return i.store }

// GetIndexer returns the Store.
func (i *Informer) GetIndexer() toolscache.Indexer { return i.store }

// Store returns the Store.
func (i *Informer) Store() *Store { return i.store }

// AddIndexers adds indexers to the Store, indexing what it holds.
func (i *Informer) AddIndexers(indexers toolscache.Indexers) error {
	return i.store.AddIndexers(indexers)
}

// GetController returns the informer as a client-go Controller.
func (i *Informer) GetController() toolscache.Controller { return informerController{i} }

// informerController is an Informer as a client-go Controller.
type informerController struct{ *Informer }

// Run runs the informer until stopCh is closed.
func (i *Informer) Run(stopCh <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stopCh:
			cancel()
		case <-ctx.Done():
		}
	}()
	i.RunWithContext(ctx)
}

// HasSynced reports whether the first list is in the store and its
// handlers have been told of it.
func (i *Informer) HasSynced() bool { return i.synced.Load() }

// HasSyncedChecker returns a DoneChecker done once the informer has synced.
func (i *Informer) HasSyncedChecker() toolscache.DoneChecker { return syncedChecker{i} }

// syncedChecker is an Informer's HasSyncedChecker.
type syncedChecker struct{ i *Informer }

func (c syncedChecker) Name() string          { return fmt.Sprintf("Informer %T", c.i.objType) }
func (c syncedChecker) Done() <-chan struct{} { return c.i.syncedCh }

// LastSyncResourceVersion returns the resourceVersion the store is at:
// its list's, then each watch event's or bookmark's.
func (i *Informer) LastSyncResourceVersion() string {
	if rv := i.rv.Load(); rv != nil {
		return *rv
	}
	return ""
}

// SetWatchErrorHandler sets what is told of a list's or watch's error;
// an error once the informer has started.
func (i *Informer) SetWatchErrorHandler(h toolscache.WatchErrorHandler) error {
	return i.SetWatchErrorHandlerWithContext(func(_ context.Context, r *toolscache.Reflector, err error) { h(r, err) })
}

// SetWatchErrorHandlerWithContext is SetWatchErrorHandler with a context.
func (i *Informer) SetWatchErrorHandlerWithContext(h toolscache.WatchErrorHandlerWithContext) error {
	return i.beforeStart(func() {
		i.onError = h
	})
}

// SetTransform sets the transform each object listed or watched goes
// through before it is stored; an error once the informer has started.
func (i *Informer) SetTransform(f toolscache.TransformFunc) error {
	return i.beforeStart(func() {
		i.transform = f
	})
}

// SetPaging sets how many objects a list asks for at a time (0: every
// object in one answer) and whether a first list may be streamed (where
// the ListerWatcher and client-go's WatchListClient feature allow it);
// an error once the informer has started.
func (i *Informer) SetPaging(pageSize int64, stream bool) error {
	return i.beforeStart(func() {
		i.pageSize, i.stream = pageSize, i.stream && stream
	})
}

// OnSynced sets f, called once, when the informer has synced (before
// HasSynced reports it); an error once the informer has started.
func (i *Informer) OnSynced(f func()) error {
	return i.beforeStart(func() {
		i.onSynced = f
	})
}

// beforeStart calls set under mu, unless the informer has started: an
// error then.
func (i *Informer) beforeStart(set func()) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.started {
		return errors.New("informer has already started")
	}
	set()
	return nil
}

// IsStopped reports whether the informer has run and stopped.
func (i *Informer) IsStopped() bool { return i.stopped.Load() }

// apply stores obj, transformed, telling the handlers: as an add of the
// initial list when initial. It is transformed under deliver, so that
// RefreshNamespace never stores an object over a version of it
// transformed before the refresh began.
func (i *Informer) apply(obj runtime.Object, transform toolscache.TransformFunc, initial bool) (metav1.Object, error) {
	i.deliver.Lock()
	defer i.deliver.Unlock()
	o, err := i.transformedMeta(obj, transform)
	if err != nil {
		return nil, err
	}
	return o, i.store.update(o, initial)
}

// transformedMeta returns obj through transform, as an object with
// metadata.
func (i *Informer) transformedMeta(obj runtime.Object, transform toolscache.TransformFunc) (metav1.Object, error) {
	t, err := i.transformed(obj, transform)
	if err != nil {
		return nil, err
	}
	o, ok := t.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("the informer keeps objects with metadata, not a %T", t)
	}
	return o, nil
}

// remove deletes obj (or a tombstone), telling the handlers.
func (i *Informer) remove(obj any) error {
	i.deliver.Lock()
	defer i.deliver.Unlock()
	return i.store.Delete(obj)
}

// resyncAll tells each handler that takes resyncs of every stored object
// as an update from itself.
func (i *Informer) resyncAll() {
	i.deliver.Lock()
	defer i.deliver.Unlock()
	if len(i.resyncers) == 0 {
		return
	}
	for _, obj := range i.store.List() {
		for _, r := range i.resyncers {
			r.h.OnUpdate(obj, obj)
		}
	}
}

// len returns how many objects the store holds.
func (s *Store) len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count
}

// setRV records the resourceVersion the store is at.
func (i *Informer) setRV(rv string) {
	if rv != "" {
		i.rv.Store(&rv)
	}
}
