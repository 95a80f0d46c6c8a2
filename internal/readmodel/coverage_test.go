package readmodel

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestCoverageIndex: the selector Locks the coverage index finds for an
// object are exactly those that cover it (Lock.Covers over every Lock),
// whatever the selector's shape: matchLabels, In, Exists, NotIn,
// DoesNotExist, kinds, empty, and several of them at once.
func TestCoverageIndex(t *testing.T) {
	req := func(key, op string, values ...string) lockv1alpha1.LabelSelectorRequirement {
		return lockv1alpha1.LabelSelectorRequirement{Key: key, Operator: op, Values: values}
	}
	selectors := map[string]lockv1alpha1.LockSelector{
		"all":        {},
		"db":         {MatchLabels: map[string]string{"tier": "db"}},
		"db-eu":      {MatchLabels: map[string]string{"tier": "db", "region": "eu"}},
		"db-or-web":  {MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{req("tier", lockv1alpha1.SelectorOpIn, "db", "web")}},
		"two-in":     {MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{req("tier", lockv1alpha1.SelectorOpIn, "db", "web", "cache"), req("region", lockv1alpha1.SelectorOpIn, "eu")}},
		"has-tier":   {MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{req("tier", lockv1alpha1.SelectorOpExists)}},
		"not-web":    {MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{req("tier", lockv1alpha1.SelectorOpNotIn, "web")}},
		"no-tier":    {MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{req("tier", lockv1alpha1.SelectorOpDoesNotExist)}},
		"gateways":   {Kinds: []string{"Gateway"}},
		"db-stacks":  {MatchLabels: map[string]string{"tier": "db"}, Kinds: []string{"Stack"}},
		"mixed":      {MatchLabels: map[string]string{"team": "a"}, MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{req("tier", lockv1alpha1.SelectorOpNotIn, "web"), req("region", lockv1alpha1.SelectorOpExists)}},
		"prefixed":   {MatchLabels: map[string]string{"example.com/tier": "db"}},
		"in-and-has": {MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{req("region", lockv1alpha1.SelectorOpExists), req("tier", lockv1alpha1.SelectorOpIn, "db")}},
	}
	src := &lockSource{watcher: watch.NewFake()}
	var all []lockv1alpha1.Lock
	for _, ns := range []string{"forge", "elsewhere"} {
		for name, s := range selectors {
			l := newSelectorLock(ns, name, s)
			src.locks = append(src.locks, *l)
			all = append(all, *l)
		}
	}
	index := startIndex(t, src)
	labelSets := []map[string]string{
		nil,
		{"tier": "db"},
		{"tier": "web"},
		{"tier": "cache", "region": "eu"},
		{"tier": "db", "region": "eu", "team": "a"},
		{"region": "us", "team": "a"},
		{"example.com/tier": "db", "tier": "db"},
		{"tier": "db", "region": "us"},
	}
	for _, kind := range []string{"Stack", "Gateway"} {
		for _, labels := range labelSets {
			o := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: kind, Name: "o", Labels: labels}
			var want []string
			for i := range all {
				if all[i].Covers(o, time.Time{}) {
					want = append(want, all[i].Name)
				}
			}
			// The object as given, and with its labels read from a Meta
			// (LabelReader, no map): the same Locks.
			read := o
			read.Labels = nil
			read.LabelReader = newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "o", Namespace: "forge", Labels: labels}}, newInterner())
			slices.Sort(want)
			for how, obj := range map[string]lockv1alpha1.Object{"": o, " through a LabelReader": read} {
				each, err := index.LiveSelectorLocksCovering("forge", []lockv1alpha1.Object{obj})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, l := range each[0] {
					got = append(got, l.Name)
				}
				slices.Sort(got)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("LiveSelectorLocksCovering(%s labelled %v%s): -want (Covers), +got:\n%s", kind, labels, how, diff)
				}
			}
		}
	}
}

// TestCoverageBuckets: the coverage index holds selector Locks by bucket
// (more keys than buckets here, so that buckets are shared, between
// namespaces too), and a lookup returns each Lock that covers the object
// once, also when the Lock's In values put it in several of the buckets
// the object's labels read.
func TestCoverageBuckets(t *testing.T) {
	labels := map[string]string{}
	for i := range 2000 {
		labels[fmt.Sprintf("k%d", i)] = fmt.Sprintf("v%d", i)
	}
	o := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "o", Labels: labels}
	visited := map[string]bool{bucket(anyKey("forge")): true}
	for k, v := range labels {
		visited[bucket(labelKey("forge", k, v))], visited[bucket(keyKey("forge", k))] = true, true
	}
	src := &lockSource{watcher: watch.NewFake()}
	var all []lockv1alpha1.Lock
	add := func(ns, name string, s lockv1alpha1.LockSelector) {
		l := newSelectorLock(ns, name, s)
		src.locks = append(src.locks, *l)
		all = append(all, *l)
	}
	for i := range indexBuckets + 1000 {
		add("forge", fmt.Sprintf("one-%d", i), lockv1alpha1.LockSelector{MatchLabels: map[string]string{fmt.Sprintf("k%d", i%3000): fmt.Sprintf("v%d", i%3000)}})
	}
	// Locks under several buckets the object reads: In the object's value
	// and 31 others.
	several := 0
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		values := []string{fmt.Sprintf("v%d", i)}
		n := 0
		for j := range 31 {
			v := fmt.Sprintf("other-%d-%d", i, j)
			values = append(values, v)
			if visited[bucket(labelKey("forge", key, v))] {
				n++
			}
		}
		if n > 0 {
			several++
		}
		in := lockv1alpha1.LabelSelectorRequirement{Key: key, Operator: lockv1alpha1.SelectorOpIn, Values: values}
		add("forge", fmt.Sprintf("in-%d", i), lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{in}})
		add("elsewhere", fmt.Sprintf("in-%d", i), lockv1alpha1.LockSelector{MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{in}})
	}
	if several == 0 {
		t.Fatal("no In Lock is under two of the buckets the object reads: the test checks nothing")
	}
	index := startIndex(t, src)
	var want []string
	for i := range all {
		if all[i].Covers(o, time.Time{}) {
			want = append(want, all[i].Namespace+"/"+all[i].Name)
		}
	}
	each, err := index.LiveSelectorLocksCovering("forge", []lockv1alpha1.Object{o})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range each[0] {
		got = append(got, l.Namespace+"/"+l.Name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("LiveSelectorLocksCovering (%d In Locks under several buckets it reads): -want (Covers), +got:\n%s", several, diff)
	}
}

// TestBucketOfParts: the buckets a lookup computes from a key's parts
// (targetBucket, labelBucket, keyBucket, anyBucket) are those of the key
// the index stores, for keys short and long (maphash buffers a long
// sequence of writes).
func TestBucketOfParts(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, p := range [][3]string{{"ns", "app", "web"}, {"", "", ""}, {"team-0001", "bench.navique.com/lock", "lock-0000001"}, {long, long[:63], long[:200]}, {"a", long, ""}} {
		ns, k, v := p[0], p[1], p[2]
		if got, want := labelBucket(ns, k, v), bucket(labelKey(ns, k, v)); got != want {
			t.Errorf("labelBucket(%.20q, %.20q, %.20q) = %s, bucket(labelKey) = %s", ns, k, v, got, want)
		}
		if got, want := keyBucket(ns, k), bucket(keyKey(ns, k)); got != want {
			t.Errorf("keyBucket(%.20q, %.20q) = %s, bucket(keyKey) = %s", ns, k, got, want)
		}
		if got, want := anyBucket(ns), bucket(anyKey(ns)); got != want {
			t.Errorf("anyBucket(%.20q) = %s, bucket(anyKey) = %s", ns, got, want)
		}
		key := lockv1alpha1.TargetKey{Namespace: ns, Group: k, Kind: v, Name: long[:len(ns)%7]}
		if got, want := targetBucket(key), bucket(key.String()); got != want {
			t.Errorf("targetBucket(%v) = %s, bucket(key.String()) = %s", key, got, want)
		}
	}
}

// BenchmarkSelectorLocksCovering: the lookup the reconciler's handler makes
// for each new object (objectEvents: which selector Locks cover it), among
// 50 selector Locks of its namespace that the lookup reads (NotIn: under
// the bucket every object reads) and that do not cover it.
// TestCoverageLookupAllocs: a coverage lookup that finds nothing, of an
// object's labels as a map or as a Meta (every new object's at start,
// objectEvents.idle), allocates nothing (not checked under the race
// detector, whose pool drops the lookups' slices: raceDetector).
func TestCoverageLookupAllocs(t *testing.T) {
	src := &lockSource{watcher: watch.NewFake()}
	for i := range 5 {
		src.locks = append(src.locks, *newSelectorLock("forge", fmt.Sprintf("l-%d", i), lockv1alpha1.LockSelector{MatchLabels: map[string]string{"app": fmt.Sprintf("v-%d", i)}}))
	}
	index := startIndex(t, src)
	labels := map[string]string{"app": "none", "tier": "none"}
	m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "o", Labels: labels}}, newInterner())
	for name, o := range map[string]lockv1alpha1.Object{
		"map":  {Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "o", Labels: labels},
		"meta": {Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "o", LabelReader: m},
	} {
		if n := testing.AllocsPerRun(100, func() { index.SelectorLocksCovering(o) }); n != 0 && !raceDetector {
			t.Errorf("a lookup of an object's labels as a %s allocates %v times, want none", name, n)
		}
	}
}

func BenchmarkSelectorLocksCovering(b *testing.B) {
	src := &lockSource{watcher: watch.NewFake()}
	for i := range 50 {
		src.locks = append(src.locks, *newSelectorLock("forge", fmt.Sprintf("l-%d", i), lockv1alpha1.LockSelector{
			MatchExpressions: []lockv1alpha1.LabelSelectorRequirement{{Key: "app", Operator: lockv1alpha1.SelectorOpNotIn, Values: []string{"none", fmt.Sprintf("v-%d", i)}}},
		}))
	}
	index := startIndexWith(b, src, CacheTransform(nil, nil))
	labels := map[string]string{"app": "none", "tier": "none"}
	o := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "o", Labels: labels}
	// The object as the cache holds it, read in place: what every new
	// object's lookup reads (objectEvents.idle).
	m := newMeta(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "o", Labels: labels}}, newInterner())
	for name, o := range map[string]lockv1alpha1.Object{"map": o, "meta": {Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "o", LabelReader: m}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if keys := index.SelectorLocksCovering(o); len(keys) != 0 {
					b.Fatalf("covered by %v", keys)
				}
			}
		})
	}
}
