// Package cachestore is the store under every informer of lockguard's
// manager cache (issue 38): a client-go Indexer that keeps no key per
// object (Store), and the informer that fills it from its lists and
// watches and keeps no copy of a list (Informer).
package cachestore

import (
	"fmt"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgofeatures "k8s.io/client-go/features"
	toolscache "k8s.io/client-go/tools/cache"
)

// Store is a client-go Indexer with the semantics of
// toolscache.NewIndexer with DeletionHandlingMetaNamespaceKeyFunc, in less
// memory. client-go's indexer keeps each object under a "namespace/name"
// key made for it, and each index as sets of those keys: 206 bytes per
// object beside the object, a Store 65 (readmodel's
// BenchmarkCacheStoreShare, 20,000 Stacks by tens in namespaces, one in
// ten owning the next nine). A Store keeps each
// namespace's objects in a table by name that holds only the objects
// (nameTable), serves controller-runtime's namespace index from those
// tables, and keeps any other index as sets of the objects themselves
// (objectSet). Keys are made only for a caller that asks for them
// (ListKeys, IndexKeys: a relist's deletions). Index sets hold each
// object's pointer, the type kept once for the Store (the name tables'
// way), while its objects are all of one type, and the objects
// themselves once a second type comes (setIndex).
//
// Safe for concurrent use; the objects are the cache's, read-only.
type Store struct {
	mu      sync.RWMutex
	objects map[string]*nameTable // by namespace, then name
	count   int
	rv      string

	indexers toolscache.Indexers
	// byNamespace is whether the namespace index (toolscache.NamespaceIndex)
	// is MetaNamespaceIndexFunc, served from objects.
	byNamespace bool
	indices     map[string]index // by index name
	// observers are told of each change (observeEach); copied on write.
	observers []toolscache.ResourceEventHandler
	// tab is the type word of every object put so far, unless wide: the
	// indices hold objects of any type.
	tab  unsafe.Pointer
	wide bool
}

var _ toolscache.Indexer = (*Store)(nil)

// New returns an empty Store with indexers.
func New(indexers toolscache.Indexers) *Store {
	s := &Store{objects: map[string]*nameTable{}, indexers: toolscache.Indexers{}, indices: map[string]index{}}
	if err := s.AddIndexers(indexers); err != nil {
		panic(err) // an empty store has no indexer to conflict with
	}
	return s
}

// Add adds obj, or replaces the object of its namespace and name.
func (s *Store) Add(obj any) error { return s.Update(obj) }

// Update replaces the object of obj's namespace and name with obj, or adds it.
func (s *Store) Update(obj any) error { return s.update(obj, false) }

// update is Update telling an observer of an add whether it is of the
// initial list (Informer's first list).
func (s *Store) update(obj any, initial bool) error {
	return s.put(obj, initial, true)
}

// put is update, setting the store's resourceVersion to obj's when
// setRV (not for an object stored again, RefreshNamespace).
func (s *Store) put(obj any, initial, setRV bool) error {
	o, ok := obj.(metav1.Object)
	if !ok {
		return fmt.Errorf("the metadata store keeps objects with metadata, not a %T", obj)
	}
	s.mu.Lock()
	old := s.putLocked(o)
	if setRV {
		s.rv = o.GetResourceVersion()
	}
	obs := s.observers
	s.mu.Unlock()
	for _, h := range obs {
		if old == nil {
			h.OnAdd(o, initial)
		} else {
			h.OnUpdate(old, o)
		}
	}
	return nil
}

// putLocked stores o and returns the object it replaced, nil for none.
func (s *Store) putLocked(o metav1.Object) metav1.Object {
	s.typed(o)
	ns := s.objects[o.GetNamespace()]
	if ns == nil {
		ns = &nameTable{}
		s.objects[o.GetNamespace()] = ns
	}
	old := ns.put(o)
	if old == nil {
		s.count++
	}
	s.reindexLocked(s.indexers, old, o)
	return old
}

// Delete removes the object of obj's namespace and name (obj may be a
// tombstone).
func (s *Store) Delete(obj any) error {
	namespace, name, err := storeName(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if ns := s.objects[namespace]; ns != nil {
		if old := ns.remove(name); old != nil {
			if ns.n == 0 {
				delete(s.objects, namespace)
			}
			s.count--
			s.reindexLocked(s.indexers, old, nil)
		}
	}
	if o, err := meta.Accessor(obj); err == nil {
		s.rv = o.GetResourceVersion()
	}
	obs := s.observers
	s.mu.Unlock()
	for _, h := range obs {
		h.OnDelete(obj)
	}
	return nil
}

// reindexLocked moves an object from old's entries in the indexes of
// indexers to o's (either may be nil), as client-go's
// storeIndex.updateIndices does.
func (s *Store) reindexLocked(indexers toolscache.Indexers, old, o metav1.Object) {
	for name, f := range indexers {
		if name == toolscache.NamespaceIndex && s.byNamespace {
			continue
		}
		var was, is []string
		if old != nil {
			was = indexValues(f, old, name)
		}
		if o != nil {
			is = indexValues(f, o, name)
		}
		index := s.indices[name]
		if len(was) == 1 && len(is) == 1 && was[0] == is[0] {
			// An update that keeps its one value (most updates): the
			// object takes its old version's place, as client-go's
			// storeIndex.updateSingleIndex leaves the key where it is.
			if index.swap(was[0], old, o) {
				continue
			}
		}
		for _, v := range was {
			index.remove(v, old)
		}
		for _, v := range is {
			index.add(v, o)
		}
	}
}

// indexValues returns f's values for o, deduplicated; like client-go's
// indexer it panics when f fails.
func indexValues(f toolscache.IndexFunc, o metav1.Object, name string) []string {
	vs, err := f(o)
	if err != nil {
		panic(fmt.Errorf("unable to calculate an index entry for %s on index %q: %w", storeKey(o.GetNamespace(), o.GetName()), name, err))
	}
	return vs
}

// List returns every object.
func (s *Store) List() []any {
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := make([]any, 0, s.count)
	for _, ns := range s.objects {
		ns.each(func(o metav1.Object) { list = append(list, o) })
	}
	return list
}

// ListKeys returns the key of every object.
func (s *Store) ListKeys() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := make([]string, 0, s.count)
	for namespace, ns := range s.objects {
		ns.each(func(o metav1.Object) { keys = append(keys, storeKey(namespace, o.GetName())) })
	}
	return keys
}

// Get returns the object of obj's namespace and name.
func (s *Store) Get(obj any) (any, bool, error) {
	namespace, name, err := storeName(obj)
	if err != nil {
		return nil, false, err
	}
	return s.get(namespace, name)
}

// GetByKey returns the object of key ("namespace/name", or "name").
func (s *Store) GetByKey(key string) (any, bool, error) {
	namespace, name, err := splitKey(key)
	if err != nil {
		return nil, false, err
	}
	return s.get(namespace, name)
}

func (s *Store) get(namespace, name string) (any, bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	ns := s.objects[namespace]
	if ns == nil {
		return nil, false, nil
	}
	o := ns.get(name)
	if o == nil {
		return nil, false, nil
	}
	return o, true, nil
}

// Replace replaces every object with list, at resourceVersion.
func (s *Store) Replace(list []any, resourceVersion string) error {
	objs := make([]metav1.Object, len(list))
	for i, obj := range list {
		o, ok := obj.(metav1.Object)
		if !ok {
			return fmt.Errorf("the metadata store keeps objects with metadata, not a %T", obj)
		}
		objs[i] = o
	}
	s.mu.Lock()
	was := s.objects
	s.objects, s.count = map[string]*nameTable{}, 0
	for name := range s.indices {
		s.indices[name] = s.newIndex()
	}
	for _, o := range objs {
		s.putLocked(o)
	}
	s.rv = resourceVersion
	obs := s.observers
	s.mu.Unlock()
	if len(obs) > 0 {
		replaced(obs, was, objs)
	}
	return nil
}

// Resync does nothing, as client-go's store.
func (s *Store) Resync() error { return nil }

// LastStoreSyncResourceVersion returns the resourceVersion of the last
// change, bookmark or replacement, as client-go's store does: "" unless
// client-go's AtomicFIFO feature is enabled.
func (s *Store) LastStoreSyncResourceVersion() string {
	if !clientgofeatures.FeatureGates().Enabled(clientgofeatures.AtomicFIFO) {
		return ""
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// Bookmark records a resourceVersion seen.
func (s *Store) Bookmark(rv string) {
	s.mu.Lock()
	s.rv = rv
	s.mu.Unlock()
}

// Index returns the objects that share an index value of indexName with obj.
func (s *Store) Index(indexName string, obj any) ([]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	f := s.indexers[indexName]
	if f == nil {
		return nil, fmt.Errorf("Index with name %s does not exist", indexName)
	}
	values, err := f(obj)
	if err != nil {
		return nil, err
	}
	seen := map[metav1.Object]bool{}
	var list []any
	for _, v := range values {
		if err := s.eachIndexed(indexName, v, func(o metav1.Object) {
			if !seen[o] {
				seen[o] = true
				list = append(list, o)
			}
		}); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// ByIndex returns the objects whose index value of indexName is value.
func (s *Store) ByIndex(indexName, value string) ([]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var list []any
	err := s.eachIndexed(indexName, value, func(o metav1.Object) { list = append(list, o) })
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []any{}
	}
	return list, nil
}

// IndexKeys returns the keys of the objects whose index value of indexName is value.
func (s *Store) IndexKeys(indexName, value string) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	keys := []string{}
	err := s.eachIndexed(indexName, value, func(o metav1.Object) { keys = append(keys, storeKey(o.GetNamespace(), o.GetName())) })
	if err != nil {
		return nil, err
	}
	return keys, nil
}

// ListIndexFuncValues returns the values index indexName holds objects under.
func (s *Store) ListIndexFuncValues(indexName string) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	values := []string{}
	if indexName == toolscache.NamespaceIndex && s.byNamespace {
		for ns := range s.objects {
			values = append(values, ns)
		}
		return values
	}
	if index := s.indices[indexName]; index != nil {
		index.values(func(v string) { values = append(values, v) })
	}
	return values
}

// GetIndexers returns the indexers.
func (s *Store) GetIndexers() toolscache.Indexers {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.indexers
}

// AddIndexers adds indexers, indexing the objects already stored; an
// indexer of a name the store has is an error.
func (s *Store) AddIndexers(indexers toolscache.Indexers) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range indexers {
		if _, has := s.indexers[name]; has {
			return fmt.Errorf("indexer conflict: %s", name)
		}
	}
	for name, f := range indexers {
		s.indexers[name] = f
		if name == toolscache.NamespaceIndex && isMetaNamespaceIndexFunc(f) {
			s.byNamespace = true
		} else {
			s.indices[name] = s.newIndex()
		}
	}
	for _, ns := range s.objects {
		ns.each(func(o metav1.Object) { s.reindexLocked(indexers, nil, o) })
	}
	return nil
}
