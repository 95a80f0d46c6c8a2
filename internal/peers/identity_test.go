package peers

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// identityTracker returns a Tracker whose view comes from identity Leases,
// with no peers, synced, and past its start's hold-off.
func identityTracker(t *testing.T) (*clock, *Tracker) {
	t.Helper()
	c := newClock()
	tr := newTracker(trackerConfig{Identity: true, TTL: time.Minute, Now: c.Now}, &fakeCache{synced: true, uids: map[types.UID]bool{}})
	tr.SetView(nil)
	return c, tr
}

// TestIdentityColdUntilOwnLeaseFresh: a replica whose view comes from
// identity Leases is warm, and admits creates, only while its own Lease is
// fresh, and only a TTL after a streak of renewals starts (the others may
// not have counted it before, and admitted creates without it).
func TestIdentityColdUntilOwnLeaseFresh(t *testing.T) {
	c, tr := identityTracker(t)
	c.add(2 * time.Minute) // past the start's hold-off
	if tr.NeedsList() || tr.Warm() {
		t.Fatal("wants a list, or warm, before its own Lease was ever fresh")
	}
	if _, err := tr.Admit(ann("u1", "a")); err == nil || !strings.Contains(err.Error(), "identity Lease") {
		t.Fatalf("Admit before the Lease is fresh: %v, want refused for the Lease", err)
	}
	from := c.now.Add(15 * time.Second)
	tr.SelfFresh(from, from.Add(12*time.Second))
	c.now = from
	if tr.NeedsList() {
		t.Fatal("wants a list right when the streak starts: the TTL hold-off is missing")
	}
	c.add(time.Minute)
	// Renewals go on: the streak keeps its start.
	tr.SelfFresh(from, c.now.Add(12*time.Second))
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm: fresh, hold-off over, listed")
	}
	if _, err := tr.Admit(ann("u2", "b")); err != nil {
		t.Fatalf("Admit while fresh: %v", err)
	}

	// The renewals stop: cold (and no admission) once the interval ends.
	c.add(12 * time.Second)
	if tr.Warm() {
		t.Fatal("warm after its own Lease's freshness ended")
	}
	if _, err := tr.Admit(ann("u3", "c")); err == nil {
		t.Fatal("Admit after the freshness ended: allowed")
	}
	// A new streak: cold for TTL from its start, then a new list.
	from2 := c.now.Add(15 * time.Second)
	tr.SelfFresh(from2, from2.Add(12*time.Second))
	c.now = from2.Add(30 * time.Second)
	tr.SelfFresh(from2, c.now.Add(12*time.Second))
	if tr.Warm() || tr.NeedsList() {
		t.Fatal("warm, or listing, within TTL of a new streak")
	}
	c.now = from2.Add(time.Minute)
	tr.SelfFresh(from2, c.now.Add(12*time.Second))
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm after the new streak's hold-off and a list")
	}

	// Stopping (Leases deletes its Lease) ends the freshness at once.
	tr.SelfFresh(time.Time{}, time.Time{})
	if tr.Warm() {
		t.Fatal("warm after its Lease was released")
	}
}

// TestWithoutIdentityNoLeaseNeeded: with a peers file or list, nothing
// changes.
func TestWithoutIdentityNoLeaseNeeded(t *testing.T) {
	_, _, tr := warmStandalone(t)
	if !tr.Warm() {
		t.Fatal("a standalone replica needs an identity Lease")
	}
}

func TestLeaseName(t *testing.T) {
	for _, tc := range []struct{ group, addr, want string }{
		{"lockguard-webhook", "127.0.0.1:9443", "lockguard-webhook-127-0-0-1-9443"},
		{"Lockguard", "[fd00::1]:9443", "lockguard--fd00--1--9443"},
	} {
		if got := LeaseName(tc.group, tc.addr); got != tc.want {
			t.Errorf("LeaseName(%q, %q) = %q, want %q", tc.group, tc.addr, got, tc.want)
		}
	}
}

// TestAdmittingIsReadiness: the readiness check "peers" fails until the
// replica knows its view, and while its identity Lease is not fresh,
// with Admit's own reasons; it passes once Admit's own conditions hold.
func TestAdmittingIsReadiness(t *testing.T) {
	c := newClock()
	tr := newTracker(trackerConfig{Identity: true, TTL: time.Minute, Now: c.Now}, &fakeCache{synced: true, uids: map[types.UID]bool{}})
	if err := tr.Admitting(); err == nil || err.Error() != "this replica does not know its peers yet" {
		t.Fatalf("Admitting before the view is known: %v", err)
	}
	tr.SetView(nil)
	if err := tr.Admitting(); err == nil || !strings.Contains(err.Error(), "identity Lease is not fresh") {
		t.Fatalf("Admitting before its Lease is fresh: %v", err)
	}
	tr.SelfFresh(c.now, c.now.Add(12*time.Second))
	if err := tr.Admitting(); err != nil {
		t.Fatalf("Admitting with the view known and the Lease fresh: %v", err)
	}
	if _, err := tr.Admit(ann("u1", "a")); err != nil {
		t.Fatalf("Admit once Admitting passes (no peers): %v", err)
	}
	c.add(12 * time.Second)
	if err := tr.Admitting(); err == nil {
		t.Fatal("Admitting after the Lease's freshness ended: nil")
	}
}
