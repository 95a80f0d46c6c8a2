package readmodel

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestLockIndexExpiry: every read of the index keeps the Locks live at its
// clock's now (Lock.Live, docs/contract.md rule 19), without any event at
// the expiry: a targetRef and a selector Lock that expire at the same
// second leave every lookup at that second, and ExpiredLocks and
// NextExpiryIn tell the reconciler which have expired and when the next
// will; StandingLocksCover still finds both, for the webhook's
// confirming read.
func TestLockIndexExpiry(t *testing.T) {
	expiry := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	expiring := newLock("forge", "for-now", "", "Stack", "forge")
	expiring.Spec.ExpiresAt = &metav1.Time{Time: expiry}
	all := newLock("forge", "all", "", "", "")
	all.Spec.TargetRef = lockv1alpha1.TargetReference{}
	all.Spec.Selector = &lockv1alpha1.LockSelector{}
	all.Spec.ExpiresAt = &metav1.Time{Time: expiry}
	src := &lockSource{watcher: watch.NewFake(), locks: []lockv1alpha1.Lock{
		*expiring, *all, *newLock("forge", "forever", "", "Stack", "other"),
	}}
	index := startIndex(t, src)
	now := expiry.Add(-time.Second)
	index.SetClock(func() time.Time { return now })

	forge := lockv1alpha1.Object{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}
	stack := schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}
	type reads struct {
		Covering, OfKind, SelectorsOfKind, SelectorsIn, In, Any, Expired []string
		Total                                                            int
		HasLive                                                          bool
		// Standing: StandingLocksCover of forge, of a Stack of forge
		// only the selector Lock covers, and of one of another namespace.
		Standing []bool
		Next     time.Duration
	}
	read := func() reads {
		var r reads
		covering, err := index.LiveLocksCovering(forge)
		if err != nil {
			t.Fatal(err)
		}
		r.Covering = lockNames(covering)
		ofKind, _ := index.LiveLocksOfKind(stack)
		r.OfKind = lockNames(ofKind)
		sel, _ := index.LiveSelectorLocksOfKind(stack)
		r.SelectorsOfKind = lockNames(sel)
		selIn, _ := index.LiveSelectorLocksIn("forge")
		r.SelectorsIn = lockNames(selIn)
		in, _ := index.LiveLocksIn("forge")
		r.In = lockNames(in)
		anyLocks, total, _ := index.AnyLiveLocks(10)
		r.Any, r.Total = lockNames(anyLocks), total
		r.HasLive, _ = index.HasLiveLocksIn("forge")
		expired, _ := index.ExpiredLocks(forge.Key())
		r.Expired = lockNames(expired)
		r.Next, _ = index.NextExpiryIn("forge", now)
		for _, o := range []lockv1alpha1.Object{forge, {Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "lone"}, {Namespace: "elsewhere", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}} {
			standing, err := index.StandingLocksCover(o.Namespace, []lockv1alpha1.Object{o})
			if err != nil {
				t.Fatal(err)
			}
			r.Standing = append(r.Standing, standing)
		}
		return r
	}
	before := reads{
		Covering: []string{"all", "for-now"}, OfKind: []string{"for-now", "forever"}, SelectorsOfKind: []string{"all"}, SelectorsIn: []string{"all"},
		In: []string{"for-now", "forever"}, Any: []string{"all", "for-now", "forever"}, Expired: []string{}, Total: 3, HasLive: true, Next: time.Second,
		Standing: []bool{true, true, false},
	}
	if diff := cmp.Diff(before, read()); diff != "" {
		t.Errorf("a second before the expiry: -want, +got:\n%s", diff)
	}
	now = expiry
	at := reads{
		Covering: []string{}, OfKind: []string{"forever"}, SelectorsOfKind: []string{}, SelectorsIn: []string{},
		In: []string{"forever"}, Any: []string{"forever"}, Expired: []string{"for-now"}, Total: 1, HasLive: true,
		// Expired Locks still stand: the webhook confirms an allowed
		// delete of what they cover (an update may have extended them).
		Standing: []bool{true, true, false},
	}
	if diff := cmp.Diff(at, read()); diff != "" {
		t.Errorf("at the expiry: -want, +got:\n%s", diff)
	}
}

// lockNames returns the names of locks, sorted; [] for none.
func lockNames(locks []lockv1alpha1.Lock) []string {
	names := []string{}
	for _, l := range locks {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names
}
