package readmodel

import (
	"fmt"
	"slices"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// coverageIndex is the name of the index NewLockIndex adds beside
// selectorIndex: live selector Locks by the buckets (bucket) of what an
// object must carry to be covered by them (coverageKeys), so that a lookup
// for an object reads the selector Locks its labels could match, not every
// selector Lock of its namespace (issue 24: a decision among 100 selector
// Locks costs about what one among 100 targetRef Locks does).
const coverageIndex = "lockguard.selector-coverage"

// indexByCoverage is the coverageIndex function: a live selector Lock is
// indexed by its coverageKeys, any other Lock not at all. As for
// selectorIndex, the Lock's liveness and its keys are computed once, when
// it enters the index, and a reader sees a Lock's old object or its new
// one, both indexed, never neither.
func indexByCoverage(obj any) ([]string, error) {
	l, ok := lockCore(obj)
	if !ok || !l.HasSelector() || !l.Standing() {
		return nil, nil
	}
	return bucketsOf(coverageKeys(l.Namespace, l.Spec.Selector)), nil
}

// coverageKeys are the coverageIndex values of a valid selector of
// namespace ns: one label that every object it matches carries, for the
// first of its matchLabels (by key); otherwise, for its In requirement of
// fewest values, the key with each value; otherwise, for its first Exists
// requirement, the key alone (keyKey); otherwise (no labels, or only
// NotIn and DoesNotExist) anyKey, which every lookup reads.
func coverageKeys(ns string, s *lockv1alpha1.LockSelector) []string {
	if len(s.MatchLabels) > 0 {
		first := ""
		for k := range s.MatchLabels {
			if first == "" || k < first {
				first = k
			}
		}
		return []string{labelKey(ns, first, s.MatchLabels[first])}
	}
	var in *lockv1alpha1.LabelSelectorRequirement
	exists := ""
	for i, r := range s.MatchExpressions {
		switch r.Operator {
		case lockv1alpha1.SelectorOpIn:
			if in == nil || len(r.Values) < len(in.Values) {
				in = &s.MatchExpressions[i]
			}
		case lockv1alpha1.SelectorOpExists:
			if exists == "" {
				exists = r.Key
			}
		}
	}
	switch {
	case in != nil:
		out := make([]string, 0, len(in.Values))
		for _, v := range in.Values {
			out = append(out, labelKey(ns, in.Key, v))
		}
		slices.Sort(out)
		return slices.Compact(out)
	case exists != "":
		return []string{keyKey(ns, exists)}
	}
	return []string{anyKey(ns)}
}

// labelKey, keyKey and anyKey are coverageIndex values of namespace ns:
// the label key=value, the label key whatever its value, and any object.
// A namespace has no slash, a label key no equals sign and is never "*":
// no two of them are equal.
func labelKey(ns, key, value string) string { return ns + "/" + key + "=" + value }
func keyKey(ns, key string) string          { return ns + "/" + key }
func anyKey(ns string) string               { return ns + "/*" }

// labelBucket, keyBucket and anyBucket are the buckets of labelKey, keyKey
// and anyKey, made without the key (bucketOf).
func labelBucket(ns, key, value string) string { return bucketOf(ns, "/", key, "=", value) }
func keyBucket(ns, key string) string          { return bucketOf(ns, "/", key) }
func anyBucket(ns string) string               { return bucketOf(ns, "/*") }

// eachSelectorLock calls fn with every selector Lock of o's namespace that
// covers o at the index's now (Lock.Covers), once each: the store's own
// object, read-only (lockCore, copyLock). It reads the coverage index under the buckets of anyKey and
// of each of o's labels, with and without its value, each bucket once; a
// Lock that covers o is under one of those keys (coverageKeys), and, when
// it is under several buckets, is passed to fn the first time only.
func (x *LockIndex) eachSelectorLock(o lockv1alpha1.Object, fn func(obj any)) error {
	now := x.now()
	return x.eachStandingSelectorLock(o, func(obj any) {
		if l, _ := lockCore(obj); liveIndexed(&l, now) {
			fn(obj)
		}
	})
}

// eachStandingSelectorLock calls fn with every standing selector Lock of
// o's namespace that selects o (Lock.Selects), live or expired, once
// each: the store's own object, read-only.
func (x *LockIndex) eachStandingSelectorLock(o lockv1alpha1.Object, fn func(obj any)) error {
	indexer := x.informer.GetIndexer()
	// The buckets of o's keys, each once: on the stack for up to 7 labels.
	buckets := objectBuckets(make([]string, 0, 16), o)
	var seen lockSet
	found := takeLookup()
	defer putLookup(found)
	// Every bucket in one read of the store.
	var err error
	if *found, err = cachestore.AppendIndexedValues((*found)[:0], indexer, coverageIndex, buckets...); err != nil {
		return fmt.Errorf("looking up the selector Locks of namespace %s: %w", o.Namespace, err)
	}
	for _, f := range *found {
		// A bucket holds the Locks of other keys, of other namespaces
		// too: Selects checks both.
		if l, ok := lockCore(f); ok && l.Selects(o) && seen.add(f) {
			fn(f)
		}
	}
	return nil
}

// objectBuckets appends to dst the buckets of o's keys (coverageKeys):
// anyBucket and each label's with and without its value, each once. A
// map's labels are ranged over as a map, and a Meta's (every new object's
// lookup, objectEvents.idle) through its labelSet, so that dst stays on
// its caller's stack; another LabelReader's through its iterator into a
// slice of their own (readerBuckets): what the body of a range over an
// interface's iterator touches escapes, and dst shared with it cost every
// lookup 6 allocations and 440 bytes in BenchmarkSelectorLocksCovering.
func objectBuckets(dst []string, o lockv1alpha1.Object) []string {
	dst = addBucket(dst, anyBucket(o.Namespace))
	switch lbls := o.ReadLabels().(type) {
	case lockv1alpha1.LabelMap:
		for k, v := range lbls {
			dst = addLabelBuckets(dst, o.Namespace, k, v)
		}
		return dst
	case *Meta:
		for k, v := range lbls.shapeOf().labels.all() {
			dst = addLabelBuckets(dst, o.Namespace, k, v)
		}
		return dst
	}
	for _, b := range readerBuckets(o.Namespace, o.ReadLabels()) {
		dst = addBucket(dst, b)
	}
	return dst
}

// addLabelBuckets adds to dst the buckets of label k=v of namespace ns,
// with and without its value (addBucket).
func addLabelBuckets(dst []string, ns, k, v string) []string {
	return addBucket(addBucket(dst, labelBucket(ns, k, v)), keyBucket(ns, k))
}

// readerBuckets returns the buckets of the labels r yields, with and
// without their values, in a slice of their own (objectBuckets).
func readerBuckets(ns string, r lockv1alpha1.LabelReader) []string {
	var out []string
	for k, v := range r.Labels() {
		out = append(out, labelBucket(ns, k, v), keyBucket(ns, k))
	}
	return out
}

// addBucket appends b to buckets unless it holds it.
func addBucket(buckets []string, b string) []string {
	if slices.Contains(buckets, b) {
		return buckets
	}
	return append(buckets, b)
}

// lockSet is a set of Locks, by the store's object: a slice while it is
// small, a map beyond lockSetSlice Locks.
type lockSet struct {
	list []any
	set  map[any]struct{}
}

// lockSetSlice is the most Locks a lockSet keeps in a slice.
const lockSetSlice = 32

// add adds l to s and reports whether it was not in s.
func (s *lockSet) add(l any) bool {
	if s.set != nil {
		if _, ok := s.set[l]; ok {
			return false
		}
		s.set[l] = struct{}{}
		return true
	}
	if slices.Contains(s.list, l) {
		return false
	}
	if s.list = append(s.list, l); len(s.list) > lockSetSlice {
		s.set = make(map[any]struct{}, 2*len(s.list))
		for _, m := range s.list {
			s.set[m] = struct{}{}
		}
		s.list = nil
	}
	return true
}
