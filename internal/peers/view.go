package peers

import (
	"slices"
	"time"
)

// SetView replaces the view with peers (other replicas' addresses). A peer
// that leaves the view while not trusted may have admitted creates this
// replica never heard of: lost.
func (t *Tracker) SetView(peers []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.cfg.Now()
	peers = slices.Clone(peers)
	slices.Sort(peers)
	peers = slices.Compact(peers)
	for _, p := range t.view {
		if slices.Contains(peers, p) {
			continue
		}
		if !now.Before(t.trusted[p]) {
			t.lostLocked(now)
		}
		delete(t.trusted, p)
	}
	if !t.viewKnown {
		t.breakLocked(now)
	}
	t.view, t.viewKnown = peers, true
}

// View returns the view, and whether it is known yet.
func (t *Tracker) View() ([]string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.view), t.viewKnown
}

// SelfFresh records that this replica's identity Lease is fresh from
// from until until, as Leases computes them: from is the same for as long
// as the replica renews without a gap. A new from starts a new streak:
// the others may have dropped this replica from their views meanwhile and
// admitted creates without telling it, so a create may be lost at from
// (cold for TTL from then, then a list).
func (t *Tracker) SelfFresh(from, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !from.Equal(t.freshFrom) {
		t.lostLocked(from)
	}
	t.freshFrom, t.freshUntil = from, until
}

// selfFreshLocked reports whether the replica's identity Lease is fresh at
// now; always true without trackerConfig.Identity.
func (t *Tracker) selfFreshLocked(now time.Time) bool {
	if !t.cfg.Identity {
		return true
	}
	return !now.Before(t.freshFrom) && now.Before(t.freshUntil)
}
