package readmodel

import (
	"hash/maphash"
	"slices"
	"strconv"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
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
