package peers

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Announcement is one admitted Lock CREATE, as replicas tell each other:
// the Lock (namespace, name, UID) and its target (in the Lock's
// namespace).
type Announcement struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Group     string    `json:"group"`
	Kind      string    `json:"kind"`
	Target    string    `json:"target"`
}

// AnnouncementOf returns the announcement of l, and false when l protects
// nothing at any time (Lock.Standing): such a Lock needs no marker. A Lock
// that will expire has one until the cache delivers it, expired or not:
// a marker only makes a replica read the API server. A selector Lock's
// announcement claims selectorKey of its namespace (Kind and Target
// AnySelected), which every object of the namespace is checked against.
func AnnouncementOf(l *lockv1alpha1.Lock) (Announcement, bool) {
	if l.HasSelector() {
		if !l.Standing() {
			return Announcement{}, false
		}
		return Announcement{Namespace: l.Namespace, Name: l.Name, UID: l.UID, Group: lockv1alpha1.Group, Kind: AnySelected, Target: AnySelected}, true
	}
	key, standing := l.StandingTarget()
	if !standing {
		return Announcement{}, false
	}
	return Announcement{Namespace: l.Namespace, Name: l.Name, UID: l.UID, Group: key.Group, Kind: key.Kind, Target: key.Name}, true
}

// AnySelected is the Kind and Target of a selector Lock's announcement: no
// Kind or object name is "*", so no targetRef Lock claims it.
const AnySelected = "*"

// selectorKey is the key a selector Lock's marker claims in namespace ns:
// the cache may lack a Lock of every object of ns while it is pending.
func selectorKey(ns string) lockv1alpha1.TargetKey {
	return lockv1alpha1.TargetKey{Namespace: ns, Group: lockv1alpha1.Group, Kind: AnySelected, Name: AnySelected}
}

// key is the target of a.
func (a Announcement) key() lockv1alpha1.TargetKey {
	return lockv1alpha1.TargetKey{Namespace: a.Namespace, Group: a.Group, Kind: a.Kind, Name: a.Target}
}

// validate returns an error when a is not the announcement of a Lock
// create the API server could have admitted, with a target it can
// protect (lockv1alpha1.ValidateCreated, the one rule of the admission
// of Lock creates too; a selector Lock's announcement claims AnySelected
// of the group). Nothing of an announcement that fails it is kept.
func (a Announcement) validate() error {
	var key *lockv1alpha1.TargetKey
	if a.Kind != AnySelected || a.Target != AnySelected {
		k := a.key()
		key = &k
	} else if a.Group != lockv1alpha1.Group {
		return fmt.Errorf("announcement of a selector Lock of group %.64q, not %s", a.Group, lockv1alpha1.Group)
	}
	if err := lockv1alpha1.ValidateCreated(a.Namespace, a.Name, a.UID, key); err != nil {
		return fmt.Errorf("announcement of a Lock the API server would not have admitted: %w", err)
	}
	return nil
}

// marker is the mark of one Lock create on its target.
type marker struct {
	a     Announcement
	added time.Time
}

// markerID identifies a marker: a Lock create's UID and the target it
// claims. Keyed by both, so that a mark of a UID with another target (a
// forged announcement, sent first) cannot stand in for the genuine one.
type markerID struct {
	uid types.UID
	key lockv1alpha1.TargetKey
}

// id returns the marker identity of a.
func (a Announcement) id() markerID { return markerID{uid: a.UID, key: a.key()} }

// markerSet holds markers by (UID, target) and counts them by target, up
// to a bound. It is not safe for concurrent use (Tracker locks it).
type markerSet struct {
	max   int
	byID  map[markerID]marker
	byUID map[types.UID][]markerID
	byKey map[lockv1alpha1.TargetKey]int
	byNS  map[string]int
}

func newMarkerSet(maxMarkers int) *markerSet {
	return &markerSet{max: maxMarkers, byID: map[markerID]marker{}, byUID: map[types.UID][]markerID{},
		byKey: map[lockv1alpha1.TargetKey]int{}, byNS: map[string]int{}}
}

// add marks a's target, at now. It returns false, marking nothing, when
// the set holds max markers already; adding a (UID, target) again keeps
// the first mark.
func (s *markerSet) add(a Announcement, now time.Time) bool {
	id := a.id()
	if _, ok := s.byID[id]; ok {
		return true
	}
	if len(s.byID) >= s.max {
		return false
	}
	s.byID[id] = marker{a: a, added: now}
	s.byUID[a.UID] = append(s.byUID[a.UID], id)
	s.byKey[id.key]++
	s.byNS[a.Namespace]++
	return true
}

// removeUID removes every marker of uid: the cache holds that Lock (or
// held it and saw it deleted), whatever targets announcements claimed.
func (s *markerSet) removeUID(uid types.UID) {
	for _, id := range s.byUID[uid] {
		s.removeID(id)
	}
}

// removeID removes the marker id, if any.
func (s *markerSet) removeID(id markerID) {
	m, ok := s.byID[id]
	if !ok {
		return
	}
	delete(s.byID, id)
	if ids := slices.DeleteFunc(s.byUID[id.uid], func(x markerID) bool { return x == id }); len(ids) == 0 {
		delete(s.byUID, id.uid)
	} else {
		s.byUID[id.uid] = ids
	}
	decrement(s.byKey, id.key)
	decrement(s.byNS, m.a.Namespace)
}

// decrement counts one less of k in m, deleting k at zero.
func decrement[K comparable](m map[K]int, k K) {
	if m[k] <= 1 {
		delete(m, k)
	} else {
		m[k]--
	}
}

// has reports whether key has a marker.
func (s *markerSet) has(key lockv1alpha1.TargetKey) bool {
	return s.byKey[key] > 0 || s.byKey[selectorKey(key.Namespace)] > 0
}

// hasIn reports whether a target in namespace ns has a marker.
func (s *markerSet) hasIn(ns string) bool { return s.byNS[ns] > 0 }

// olderThan returns the markers added before cutoff.
func (s *markerSet) olderThan(cutoff time.Time) []marker {
	var out []marker
	for _, m := range s.byID {
		if m.added.Before(cutoff) {
			out = append(out, m)
		}
	}
	return out
}

// len returns the number of markers.
func (s *markerSet) len() int { return len(s.byID) }

// Mark marks a's target, unless the cache already holds the Lock. Past
// the bound it marks nothing and the replica goes cold (lost).
func (t *Tracker) Mark(a Announcement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markLocked(a, t.cfg.Now())
}

func (t *Tracker) markLocked(a Announcement, now time.Time) {
	// Under t.mu, as Observe: either the store holds the Lock now, or
	// the informer's handler (which runs after the store has it) removes
	// the marker later.
	if t.cache.HasUID(a.Namespace, a.Name, a.UID) {
		return
	}
	if !t.markers.add(a, now) {
		t.lostLocked(now)
	}
}

// Observe removes the marker of uid: the Lock informer delivered it (its
// store holds the Lock, or no longer does because it was deleted).
func (t *Tracker) Observe(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markers.removeUID(uid)
}

// Expired returns the markers older than TTL, for a quorum read of their
// Locks (Clear).
func (t *Tracker) Expired() []Announcement {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Announcement
	for _, m := range t.markers.olderThan(t.cfg.Now().Add(-t.cfg.TTL)) {
		out = append(out, m.a)
	}
	return out
}

// Clear removes the marker of a (its UID and target, as Expired returned
// it): a quorum read found its Lock absent, or with another UID, after
// TTL (its create never reached etcd, or the Lock is gone), or the cache
// holds it. Other marks of the UID stay: each is cleared on its own
// evidence.
func (t *Tracker) Clear(a Announcement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.markers.removeID(a.id())
}
