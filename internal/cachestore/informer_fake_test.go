package cachestore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
)

// apiServer is an API server of PartialObjectMetadata for an Informer's
// tests: it lists a page at a time at its current resourceVersion,
// streams a list (SendInitialEvents) unless noStream, and watches from a
// resourceVersion it still has the events after (410 before compacted).
type apiServer struct {
	mu        sync.Mutex
	rv        uint64
	objects   map[[2]string]*metav1.PartialObjectMetadata
	events    []watch.Event // after compacted, in order
	compacted uint64
	watches   []*fakeWatch
	noStream  bool
	endAtOnce bool // every watch ends as it begins
	// slowStream: a stream outlasts any timeout it asks for (a watch with
	// TimeoutSeconds ends after half its initial events), as kube-apiserver
	// streaming a million objects from etcd under load ends it at its
	// timeout (the scale benchmark's worst case, 2026-12-07).
	slowStream bool
	snapshots  map[string][]*metav1.PartialObjectMetadata // a list's, by resourceVersion and field selector

	lists, streams, resumes int
	watchRVs                []string
}

func newAPIServer() *apiServer {
	return &apiServer{objects: map[[2]string]*metav1.PartialObjectMetadata{}}
}

// put adds or changes an object, as a write would.
func (a *apiServer) put(namespace, name string, labels map[string]string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	k := [2]string{namespace, name}
	typ := watch.Modified
	if a.objects[k] == nil {
		typ = watch.Added
	}
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, Labels: labels, ResourceVersion: strconv.FormatUint(a.rv, 10),
		UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012x", a.rv)),
	}}
	a.objects[k] = o
	a.send(watch.Event{Type: typ, Object: o.DeepCopy()})
}

// remove deletes an object, as a delete would.
func (a *apiServer) remove(namespace, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := [2]string{namespace, name}
	o := a.objects[k]
	if o == nil {
		return
	}
	a.rv++
	delete(a.objects, k)
	o = o.DeepCopy()
	o.ResourceVersion = strconv.FormatUint(a.rv, 10)
	a.send(watch.Event{Type: watch.Deleted, Object: o})
}

// compact forgets the events so far: a watch from before gets a 410.
func (a *apiServer) compact() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events, a.compacted = nil, a.rv
}

// closeWatches ends every watch, as an API server ends them.
func (a *apiServer) closeWatches() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.watches {
		w.Stop()
	}
	a.watches = nil
}

func (a *apiServer) send(ev watch.Event) {
	a.events = append(a.events, ev)
	for _, w := range a.watches {
		w.queue(ev)
	}
}

// sorted returns the objects by namespace and name.
func (a *apiServer) sorted() []*metav1.PartialObjectMetadata {
	var out []*metav1.PartialObjectMetadata
	for _, o := range a.objects {
		out = append(out, o)
	}
	slices.SortFunc(out, func(x, y *metav1.PartialObjectMetadata) int {
		if c := compareStrings(x.Namespace, y.Namespace); c != 0 {
			return c
		}
		return compareStrings(x.Name, y.Name)
	})
	return out
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (a *apiServer) List(opts metav1.ListOptions) (runtime.Object, error) {
	return a.ListWithContext(context.Background(), opts)
}

func (a *apiServer) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return a.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists opts.Limit objects from opts.Continue (an index
// into the sorted objects; the list is at the current resourceVersion).
func (a *apiServer) ListWithContext(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lists++
	// A list's pages are of one snapshot, as the API server's are.
	all, from, rv := a.sorted(), 0, a.rv
	snap := fmt.Sprintf("%d %s", rv, opts.FieldSelector)
	if opts.Continue != "" {
		snap, _, _ = strings.Cut(opts.Continue, "/")
		rv, _ = strconv.ParseUint(strings.Fields(snap)[0], 10, 64)
		all = a.snapshots[snap]
		from, _ = strconv.Atoi(opts.Continue[len(snap)+1:])
	} else {
		if opts.FieldSelector != "" {
			sel, err := fields.ParseSelector(opts.FieldSelector)
			if err != nil {
				return nil, apierrors.NewBadRequest(err.Error())
			}
			all = slices.DeleteFunc(all, func(o *metav1.PartialObjectMetadata) bool {
				return !sel.Matches(fields.Set{"metadata.namespace": o.Namespace, "metadata.name": o.Name})
			})
		}
		if a.snapshots == nil {
			a.snapshots = map[string][]*metav1.PartialObjectMetadata{}
		}
		a.snapshots[snap] = all
	}
	to := len(all)
	if opts.Limit > 0 && from+int(opts.Limit) < to {
		to = from + int(opts.Limit)
	}
	l := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}}
	if to < len(all) {
		l.Continue = fmt.Sprintf("%s/%d", snap, to)
	}
	for _, o := range all[from:to] {
		l.Items = append(l.Items, *o.DeepCopy())
	}
	return l, nil
}

// WatchWithContext streams a list (SendInitialEvents), or watches from
// opts.ResourceVersion.
func (a *apiServer) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := &fakeWatch{ch: make(chan watch.Event), stop: make(chan struct{})}
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		if a.noStream {
			return nil, apierrors.NewInvalid(schema.GroupKind{Kind: "ListOptions"}, "", field.ErrorList{
				field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"),
			})
		}
		a.streams++
		all := a.sorted()
		if a.slowStream && opts.TimeoutSeconds != nil {
			all, w.endWhenDrained = all[:len(all)/2], true
		}
		for _, o := range all {
			w.queue(watch.Event{Type: watch.Added, Object: o.DeepCopy()})
		}
		if !w.endWhenDrained {
			w.queue(watch.Event{Type: watch.Bookmark, Object: &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				ResourceVersion: strconv.FormatUint(a.rv, 10),
				Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
			}}})
		}
	} else {
		a.resumes++
		a.watchRVs = append(a.watchRVs, opts.ResourceVersion)
		from, err := strconv.ParseUint(opts.ResourceVersion, 10, 64)
		if err != nil || from < a.compacted {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %s (%d)", opts.ResourceVersion, a.compacted))
		}
		for _, ev := range a.events {
			if rvOf(ev.Object) > from {
				w.queue(ev)
			}
		}
	}
	if a.endAtOnce && (opts.SendInitialEvents == nil || !*opts.SendInitialEvents) {
		close(w.ch)
		return w, nil
	}
	a.watches = append(a.watches, w)
	go w.run()
	return w, nil
}

func rvOf(obj runtime.Object) uint64 {
	n, _ := strconv.ParseUint(obj.(metav1.Object).GetResourceVersion(), 10, 64)
	return n
}

// fakeWatch is a watch with an unbounded queue of events.
type fakeWatch struct {
	mu      sync.Mutex
	pending []watch.Event
	wake    chan struct{}
	ch      chan watch.Event
	stop    chan struct{}
	once    sync.Once
	// endWhenDrained ends the watch once its queue is empty.
	endWhenDrained bool
}

func (w *fakeWatch) queue(ev watch.Event) {
	w.mu.Lock()
	w.pending = append(w.pending, ev)
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	w.mu.Unlock()
}

func (w *fakeWatch) run() {
	defer close(w.ch)
	for {
		w.mu.Lock()
		if w.wake == nil {
			w.wake = make(chan struct{}, 1)
		}
		wake := w.wake
		var ev *watch.Event
		if len(w.pending) > 0 {
			ev = &w.pending[0]
			w.pending = w.pending[1:]
		}
		w.mu.Unlock()
		if ev == nil && w.endWhenDrained {
			return
		}
		if ev == nil {
			select {
			case <-wake:
				continue
			case <-w.stop:
				return
			}
		}
		select {
		case w.ch <- *ev:
		case <-w.stop:
			return
		}
	}
}

func (w *fakeWatch) Stop()                          { w.once.Do(func() { close(w.stop) }) }
func (w *fakeWatch) ResultChan() <-chan watch.Event { return w.ch }
