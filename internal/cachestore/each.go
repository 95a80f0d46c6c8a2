package cachestore

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
func (s *Store) AppendByIndex(dst []any, indexName, value string) ([]any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	err := s.eachIndexed(indexName, value, func(o metav1.Object) { dst = append(dst, o) })
	return dst, err
}
