package cachestore

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// EachByIndex calls fn with each object whose index value of indexName is
// value: the objects ByIndex returns, without the slice it makes of them
// (a reconciler pass that reads every object of a namespace, once per
// selector Lock of it, made one for each). fn runs under the store's read
// lock: it must not call the store, nor wait for anything that does.
func (s *Store) EachByIndex(indexName, value string, fn func(metav1.Object)) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.eachIndexed(indexName, value, fn)
}

// AppendByIndex appends to dst the objects ByIndex returns and returns the
// extended slice: a caller that looks up often reuses one slice rather
// than have ByIndex make one each time (the Lock index's lookups for each
// new object of a million at start). Nothing of the store is held once it
// returns.
//
// It allocates nothing but dst's growth: no func reads the index
// (appendTo), so a lookup into a slice reused allocates nothing.
func (s *Store) AppendByIndex(dst []any, indexName, value string) ([]any, error) {
	return s.AppendByIndexValues(dst, indexName, value)
}

// AppendByIndexValues is AppendByIndex of each of values in turn, under
// one read lock: one consistent read of the store, where a lookup of each
// takes the lock (whose reader count every core serving a review writes)
// once each.
func (s *Store) AppendByIndexValues(dst []any, indexName string, values ...string) ([]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	tables, err := s.fromTables(indexName)
	if err != nil {
		return dst, err
	}
	for _, value := range values {
		if !tables {
			dst = s.indices[indexName].appendTo(dst, value)
		} else if ns := s.objects[value]; ns != nil {
			dst = ns.appendTo(dst)
		}
	}
	return dst, nil
}

// EachIndexed is EachByIndex of store when it is a Store, and otherwise
// (client-go's store, in tests) fn with each metav1.Object of ByIndex's
// copy.
func EachIndexed(store toolscache.Indexer, indexName, value string, fn func(metav1.Object)) error {
	if s, ok := store.(*Store); ok {
		return s.EachByIndex(indexName, value, fn)
	}
	objs, err := store.ByIndex(indexName, value)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if m, ok := o.(metav1.Object); ok {
			fn(m)
		}
	}
	return nil
}

// AppendIndexed is AppendByIndex of store when it is a Store, and
// otherwise (client-go's store, in tests) dst with ByIndex's copy
// appended.
func AppendIndexed(dst []any, store toolscache.Indexer, indexName, value string) ([]any, error) {
	return AppendIndexedValues(dst, store, indexName, value)
}

// AppendIndexedValues is AppendByIndexValues of store when it is a Store,
// and otherwise (client-go's store, in tests) dst with ByIndex's copy of
// each of values appended.
func AppendIndexedValues(dst []any, store toolscache.Indexer, indexName string, values ...string) ([]any, error) {
	if s, ok := store.(*Store); ok {
		return s.AppendByIndexValues(dst, indexName, values...)
	}
	for _, value := range values {
		objs, err := store.ByIndex(indexName, value)
		if err != nil {
			return dst, err
		}
		dst = append(dst, objs...)
	}
	return dst, nil
}

// AnyByIndex reports whether index indexName holds any object under
// value, copying none: of the namespace index, one look at the
// namespace's name table (every DELETE review asks it of the Lock
// store, webhook's lockReader.nothingIn).
func (s *Store) AnyByIndex(indexName, value string) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	tables, err := s.fromTables(indexName)
	if err != nil {
		return false, err
	}
	if tables {
		ns := s.objects[value]
		return ns != nil && ns.n > 0, nil
	}
	found := false
	s.indices[indexName].each(value, func(metav1.Object) { found = true })
	return found, nil
}

// AnyIndexed is AnyByIndex of store when it is a Store, and otherwise
// (client-go's store, in tests) whether ByIndex returns any object.
func AnyIndexed(store toolscache.Indexer, indexName, value string) (bool, error) {
	if s, ok := store.(*Store); ok {
		return s.AnyByIndex(indexName, value)
	}
	objs, err := store.ByIndex(indexName, value)
	return len(objs) > 0, err
}

// eachIndexed calls fn with the objects that index indexName holds under value.
func (s *Store) eachIndexed(indexName, value string, fn func(metav1.Object)) error {
	tables, err := s.fromTables(indexName)
	if err != nil {
		return err
	}
	if tables {
		if ns := s.objects[value]; ns != nil {
			ns.each(fn)
		}
		return nil
	}
	s.indices[indexName].each(value, fn)
	return nil
}

// fromTables reports whether index indexName is served from the name
// tables (the namespace index), or an error if there is no such index.
func (s *Store) fromTables(indexName string) (bool, error) {
	if _, ok := s.indexers[indexName]; !ok {
		return false, fmt.Errorf("Index with name %s does not exist", indexName)
	}
	return indexName == toolscache.NamespaceIndex && s.byNamespace, nil
}
