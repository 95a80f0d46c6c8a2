package cachestore

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// observeEach adds h, which from then on is told of every change to the
// Store, in the goroutine that makes it (the informer's), once it is
// made, as client-go's informer tells its handlers: an add
// (isInInitialList false), an update with the object replaced, a delete
// with what the informer deleted (an object or a tombstone), and for a
// replacement (a relist) a delete of a tombstone for each object gone,
// then an add or update for each object listed. h must not wait: the
// informer waits for it. It returns a func that removes h.
//
// observeEach calls fn with each object stored when h was added, of which
// h is told nothing, a namespace at a time, holding no slice of every
// object (at a million objects, 16.8 MB at the start's peak:
// benchmarks.md section 9, run AO): for a caller that keeps the Store
// from changing until it returns (Informer, under its deliver lock).
func (s *Store) observeEach(h toolscache.ResourceEventHandler, fn func(any)) (stop func()) {
	s.mu.Lock()
	stop = s.observeLocked(h)
	namespaces := make([]string, 0, len(s.objects))
	for ns := range s.objects {
		namespaces = append(namespaces, ns)
	}
	s.mu.Unlock()
	var buf []any
	for _, ns := range namespaces {
		s.mu.RLock()
		if t := s.objects[ns]; t != nil {
			buf = t.appendTo(buf[:0])
		}
		s.mu.RUnlock()
		for _, obj := range buf {
			fn(obj)
		}
	}
	return stop
}

// observeLocked adds h and returns the func that removes it.
func (s *Store) observeLocked(h toolscache.ResourceEventHandler) (stop func()) {
	o := &observer{h}
	s.observers = append(slices.Clip(s.observers), o)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.observers = slices.DeleteFunc(slices.Clone(s.observers), func(x toolscache.ResourceEventHandler) bool { return x == o })
	}
}

// observer is a handler added by observeEach: a pointer of its own, so that
// its removal finds it whatever the handler is.
type observer struct {
	toolscache.ResourceEventHandler
}

// replaced tells obs of a replacement of the objects of was (by
// namespace, then name) by objs, as client-go's informer tells its
// handlers of a relist: a delete of a tombstone for each object gone,
// then an add or an update for each object listed.
func replaced(obs []toolscache.ResourceEventHandler, was map[string]*nameTable, objs []metav1.Object) {
	listed := make(map[[2]string]metav1.Object, len(objs))
	for _, o := range objs {
		listed[[2]string{o.GetNamespace(), o.GetName()}] = nil
	}
	for namespace, ns := range was {
		ns.each(func(old metav1.Object) {
			if _, ok := listed[[2]string{namespace, old.GetName()}]; ok {
				return
			}
			tomb := toolscache.DeletedFinalStateUnknown{Key: storeKey(namespace, old.GetName()), Obj: old}
			for _, h := range obs {
				h.OnDelete(tomb)
			}
		})
	}
	for _, o := range objs {
		// A name listed twice: the second replaces the first.
		key := [2]string{o.GetNamespace(), o.GetName()}
		old := listed[key]
		if ns := was[o.GetNamespace()]; old == nil && ns != nil {
			old = ns.get(o.GetName())
		}
		listed[key] = o
		for _, h := range obs {
			if old == nil {
				h.OnAdd(o, false)
			} else {
				h.OnUpdate(old, o)
			}
		}
	}
}
