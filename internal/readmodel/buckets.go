package readmodel

import (
	"fmt"
	"hash/maphash"
	"slices"
	"strconv"
	"sync"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// indexBuckets is the number of values the target and coverage indexes
// (targetIndex, coverageIndex) spread Locks over (issue 38). client-go's
// indexer keeps a set (a map) per index value: one value per target cost
// about 300 bytes per Lock, the set of one entry alone about 190. Hashed into indexBuckets values, a set
// holds a few Locks at scale (about 6 at 100,000 Locks, in one small map),
// and a lookup reads the Locks of its bucket, keeping those of the key
// looked up (BenchmarkHandlerScaling: a review at 100,000 Locks costs what
// it costs at 10, as before).
const indexBuckets = 1 << 14

// bucketSeed makes the buckets of a key unpredictable from outside the
// process: whoever creates Locks cannot pile them into one bucket that a
// lookup then reads whole.
var bucketSeed = maphash.MakeSeed()

// bucketNames are the index values of the buckets, made once: a lookup
// allocates none.
var bucketNames = func() (names [indexBuckets]string) {
	for i := range names {
		names[i] = strconv.FormatUint(uint64(i), 16)
	}
	return names
}()

// bucket returns the index value of key's bucket.
func bucket(key string) string {
	return bucketNames[maphash.String(bucketSeed, key)%indexBuckets]
}

// bucketsOf returns the buckets of keys, each once.
func bucketsOf(keys []string) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if b := bucket(k); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// bucketOf returns the bucket of the key its parts make, one after the
// other (bucket(strings.Join(parts, ""))), without making the key: a
// lookup on the webhook's path builds no key string (maphash hashes a
// sequence of writes as their concatenation).
func bucketOf(parts ...string) string {
	var h maphash.Hash
	h.SetSeed(bucketSeed)
	for _, p := range parts {
		h.WriteString(p)
	}
	return bucketNames[h.Sum64()%indexBuckets]
}

// targetBucket is bucket(key.String()), the target index's value of key.
func targetBucket(key lockv1alpha1.TargetKey) string {
	return bucketOf(key.Namespace, "/", key.Group, "/", key.Kind, "/", key.Name)
}

// lookups are the slices eachStandingSelectorLock and eachByTarget read a
// bucket's Locks into, reused (takeLookup, putLookup): both run for each
// new object (objectEvents), a million at the start of run AC, where a
// slice each time was 28.5 and 13 MB of the start's peak heap.
var lookups = sync.Pool{New: func() any { return new([]any) }}

// takeLookup returns an empty slice of lookups, to be given back with
// putLookup once read: a nested lookup takes another.
func takeLookup() *[]any {
	p := lookups.Get().(*[]any)
	*p = (*p)[:0]
	return p
}

// putLookup gives p back to lookups, cleared to its capacity (a bucket
// read before a smaller one left Locks beyond its length): the pool keeps
// no Lock of the store alive.
func putLookup(p *[]any) {
	clear((*p)[:cap(*p)])
	*p = (*p)[:0]
	lookups.Put(p)
}

// byTarget returns the standing Locks that target key (eachByTarget), nil
// for none.
func (x *LockIndex) byTarget(key lockv1alpha1.TargetKey) ([]any, error) {
	var found []any
	err := x.eachByTarget(key, func(obj any) { found = append(found, obj) })
	return found, err
}

// eachByTarget calls fn with every standing Lock that targets key, as the
// index holds it (the store's object: read-only, lockCore, copyLock):
// those of key's bucket whose target is key. The bucket is read into a
// slice of lookups: a lookup that finds none (every new object's,
// objectEvents) allocates nothing.
func (x *LockIndex) eachByTarget(key lockv1alpha1.TargetKey, fn func(obj any)) error {
	found := takeLookup()
	defer putLookup(found)
	var err error
	if *found, err = cachestore.AppendIndexed(*found, x.informer.GetIndexer(), targetIndex, targetBucket(key)); err != nil {
		return fmt.Errorf("looking up the Locks of %s %s/%s: %w", key.GroupKind(), key.Namespace, key.Name, err)
	}
	for _, obj := range *found {
		l, ok := lockCore(obj)
		if !ok || l.Spec.TargetRef.Name != key.Name || l.Namespace != key.Namespace {
			continue
		}
		if target, standing := l.StandingTarget(); standing && target == key {
			fn(obj)
		}
	}
	return nil
}
