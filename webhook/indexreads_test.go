package webhook

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

var _ Coverage = (*readmodel.LockIndex)(nil)

// countedLocks counts the lookups of the index a decision makes; it is no
// Coverage (the three lookups are asked), unless wrapped in countedCoverage.
type countedLocks struct {
	Locks
	calls map[string]int
}

func (c *countedLocks) LiveLocks(k lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	c.calls["LiveLocks"]++
	return c.Locks.LiveLocks(k)
}

func (c *countedLocks) LiveSelectorLocksCovering(ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, error) {
	c.calls["LiveSelectorLocksCovering"]++
	return c.Locks.LiveSelectorLocksCovering(ns, objs)
}

func (c *countedLocks) StandingLocksCover(ns string, objs []lockv1alpha1.Object) (bool, error) {
	c.calls["StandingLocksCover"]++
	return c.Locks.StandingLocksCover(ns, objs)
}

// countedCoverage is countedLocks of a Coverage.
type countedCoverage struct{ *countedLocks }

func (c countedCoverage) LocksCovering(ns string, objs []lockv1alpha1.Object) ([][]lockv1alpha1.Lock, bool, error) {
	c.calls["LocksCovering"]++
	return c.Locks.(Coverage).LocksCovering(ns, objs)
}

// TestOneIndexReadPerDelete: a DELETE the object guard decides reads the
// index once when it is a Coverage (readmodel.LockIndex.LocksCovering),
// where it asked LiveLocks, LiveSelectorLocksCovering and, for a delete
// the cache would allow on a warm replica, StandingLocksCover (reading
// the target's and its selector Locks' index entries twice); the
// decisions and the confirmations they make are the same either way.
func TestOneIndexReadPerDelete(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	pinned := newLock("forge", "pinned", "", "Stack", "pinned")
	expired := newLock("forge", "old", "", "Stack", "lapsed")
	expired.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Minute)}
	tier := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "tier-db"},
		Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}}}
	api := fake.NewClientBuilder().WithScheme(lockScheme(t)).WithObjects(pinned, expired, tier.DeepCopy()).Build()
	cases := map[string]struct {
		name    string
		labels  map[string]string
		allowed bool
		// separate are the lookups of a Locks that is no Coverage.
		separate  map[string]int
		confirmed []string
	}{
		"Unlocked":    {name: "free", allowed: true, separate: map[string]int{"LiveLocks": 1, "LiveSelectorLocksCovering": 1, "StandingLocksCover": 1}},
		"Locked":      {name: "pinned", separate: map[string]int{"LiveLocks": 1, "LiveSelectorLocksCovering": 1}},
		"Selected":    {name: "db", labels: map[string]string{"tier": "db"}, separate: map[string]int{"LiveLocks": 1, "LiveSelectorLocksCovering": 1}},
		"LockExpired": {name: "lapsed", allowed: true, separate: map[string]int{"LiveLocks": 1, "LiveSelectorLocksCovering": 1, "StandingLocksCover": 1}, confirmed: []string{ReasonLowered}},
		"OtherLabels": {name: "web", labels: map[string]string{"tier": "web"}, allowed: true, separate: map[string]int{"LiveLocks": 1, "LiveSelectorLocksCovering": 1, "StandingLocksCover": 1}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			type answer struct {
				Allowed   bool
				Calls     map[string]int
				Confirmed []string
			}
			decide := func(one bool) answer {
				c := &countedLocks{Locks: readmodeltest.Index(t, clock, *pinned, *expired, tier), calls: map[string]int{}}
				var locks Locks = c
				if one {
					locks = countedCoverage{c}
				}
				f := &freshness{calls: new([]string)} // warm: the index may lack no Lock
				h := NewHandler(Config{Locks: locks, Live: api, Freshness: f, Now: clock})
				req := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", tc.name, tc.name)
				req.OldObject.Metadata.Labels = tc.labels
				return answer{Allowed: h.Decide(context.Background(), req).Allowed, Calls: c.calls, Confirmed: f.confirmed}
			}
			separate, one := decide(false), decide(true)
			if separate.Allowed != tc.allowed || !maps.Equal(separate.Calls, tc.separate) || !slices.Equal(separate.Confirmed, tc.confirmed) {
				t.Errorf("without a Coverage: allowed %v after %v, confirmed %q; want %v after %v, confirmed %q",
					separate.Allowed, separate.Calls, separate.Confirmed, tc.allowed, tc.separate, tc.confirmed)
			}
			if want := (answer{Allowed: separate.Allowed, Calls: map[string]int{"LocksCovering": 1}, Confirmed: separate.Confirmed}); !cmp.Equal(one, want) {
				t.Errorf("with a Coverage: -want, +got:\n%s", cmp.Diff(want, one))
			}
		})
	}
}
