package readmodel

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestCachedLockIndexReads: every read of a LockIndex whose informer
// stores CachedLocks (CacheTransform) answers exactly as one whose
// informer stores compactLock's Locks (the cache before CachedLock), over
// the Locks of cachedLockVariety, at instants before and after their
// expiry, for targets and labelled objects of several kinds.
func TestCachedLockIndexReads(t *testing.T) {
	var locks []lockv1alpha1.Lock
	for _, l := range cachedLockVariety(t) {
		locks = append(locks, *l)
	}
	shared := newInterner()
	compact := startIndexWith(t, &lockSource{locks: locks, watcher: watch.NewFake()}, transformLockCompact(shared))
	cached := startIndex(t, &lockSource{locks: locks, watcher: watch.NewFake()})

	var objs []lockv1alpha1.Object
	for i := range 40 {
		objs = append(objs, lockv1alpha1.Object{Namespace: "team-a", Group: lockv1alpha1.Group, Kind: "Stack", Name: fmt.Sprintf("stack-%d", i)})
	}
	objs = append(objs,
		lockv1alpha1.Object{Namespace: "team-a", Group: lockv1alpha1.Group, Kind: "Stack", Name: "x", Labels: map[string]string{"tier": "db", "env": "a"}},
		lockv1alpha1.Object{Namespace: "team-a", Group: lockv1alpha1.Group, Kind: "Gateway", Name: "y", Labels: map[string]string{"tier": "db"}},
		lockv1alpha1.Object{Namespace: "team-a", Group: "apps", Kind: "Deployment", Name: "d"},
		lockv1alpha1.Object{Namespace: "team-0000", Group: lockv1alpha1.Group, Kind: "Stack", Name: "stack-0000003", Labels: map[string]string{"bench.navique.com/lock": "lock-0000003"}},
	)
	kinds := []schema.GroupKind{{Group: lockv1alpha1.Group, Kind: "Stack"}, {Group: lockv1alpha1.Group, Kind: "Gateway"}, {Group: "apps", Kind: "Deployment"}}
	namespaces := []string{"team-a", "team-0000", "other"}

	for _, at := range []time.Time{time.Unix(1650000000, 0), time.Unix(1900000000, 0), time.Unix(1950000000, 0)} {
		compact.SetClock(func() time.Time { return at })
		cached.SetClock(func() time.Time { return at })
		// read answers one question of both indexes.
		read := func(what string, of func(x *LockIndex) any) {
			t.Helper()
			if diff := cmp.Diff(inOrder(of(compact)), inOrder(of(cached))); diff != "" {
				t.Errorf("at %s, %s: -compactLock's, +CachedLock's:\n%s", at.UTC().Format(time.RFC3339), what, diff)
			}
		}
		for _, o := range objs {
			read("LiveLocks "+o.Name, func(x *LockIndex) any { return pair(x.LiveLocks(o.Key())) })
			read("Names "+o.Name, func(x *LockIndex) any { return pair(x.Names(o.Key())) })
			read("ExpiredLocks "+o.Name, func(x *LockIndex) any { return pair(x.ExpiredLocks(o.Key())) })
			read("LiveLocksCovering "+o.Name, func(x *LockIndex) any { return pair(x.LiveLocksCovering(o)) })
			read("SelectorLocksCovering "+o.Name, func(x *LockIndex) any { return x.SelectorLocksCovering(o) })
		}
		for _, ns := range namespaces {
			read("LiveSelectorLocksIn "+ns, func(x *LockIndex) any { return pair(x.LiveSelectorLocksIn(ns)) })
			read("LiveLocksIn "+ns, func(x *LockIndex) any { return pair(x.LiveLocksIn(ns)) })
			read("HasLiveLocksIn "+ns, func(x *LockIndex) any { return pair(x.HasLiveLocksIn(ns)) })
			read("LiveTargetsIn "+ns, func(x *LockIndex) any { return x.LiveTargetsIn(ns) })
			read("NextExpiryIn "+ns, func(x *LockIndex) any { return pair(x.NextExpiryIn(ns, at)) })
			read("LiveSelectorLocksCovering "+ns, func(x *LockIndex) any { return pair(x.LiveSelectorLocksCovering(ns, objs)) })
			read("StandingLocksCover "+ns, func(x *LockIndex) any { return pair(x.StandingLocksCover(ns, objs)) })
			read("LocksCovering "+ns, func(x *LockIndex) any {
				live, standing, err := x.LocksCovering(ns, objs)
				return []any{live, standing, err}
			})
		}
		for _, gk := range kinds {
			read("LiveLocksOfKind "+gk.String(), func(x *LockIndex) any { return pair(x.LiveLocksOfKind(gk)) })
			read("LiveSelectorLocksOfKind "+gk.String(), func(x *LockIndex) any { return pair(x.LiveSelectorLocksOfKind(gk)) })
		}
		for _, limit := range []int{0, 1, 7, 1000} {
			read(fmt.Sprint("AnyLiveLocks ", limit), func(x *LockIndex) any {
				l, n, err := x.AnyLiveLocks(limit)
				return []any{l, n, err}
			})
		}
	}
	for _, l := range locks {
		for _, uid := range []types.UID{l.UID, l.UID + "x", ""} {
			if want, got := compact.HasUID(l.Namespace, l.Name, uid), cached.HasUID(l.Namespace, l.Name, uid); got != want {
				t.Errorf("HasUID(%s, %s, %q): %v, want %v", l.Namespace, l.Name, uid, got, want)
			}
		}
	}
	readiness := func(x *LockIndex) map[string]int {
		counts := map[string]int{}
		x.EachReadiness(func(active, ready bool, reason string) {
			counts[fmt.Sprint(active, ready, reason)]++
		})
		return counts
	}
	if diff := cmp.Diff(readiness(compact), readiness(cached)); diff != "" {
		t.Errorf("EachReadiness: -compactLock's, +CachedLock's:\n%s", diff)
	}
}

// inOrder sorts the lists in v, an answer of a LockIndex, which come in
// the order of the store's sets (it differs between two stores), and
// returns v.
func inOrder(v any) any {
	switch l := v.(type) {
	case []any:
		for _, e := range l {
			inOrder(e)
		}
	case [][]lockv1alpha1.Lock:
		for _, e := range l {
			inOrder(e)
		}
	case []lockv1alpha1.Lock:
		slices.SortFunc(l, func(a, b lockv1alpha1.Lock) int { return compareLocks(lockName(&a), lockName(&b)) })
	case []lockv1alpha1.TargetKey:
		slices.SortFunc(l, func(a, b lockv1alpha1.TargetKey) int { return strings.Compare(a.String(), b.String()) })
	case []types.NamespacedName:
		slices.SortFunc(l, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	}
	return v
}

// pair is the two results of a read, compared as one.
func pair[A, B any](a A, b B) []any { return []any{a, b} }
