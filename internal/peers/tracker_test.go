package peers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// fakeCache is the Lock informer: synced or not, and the UIDs its store
// holds.
type fakeCache struct {
	synced bool
	uids   map[types.UID]bool
}

func (c *fakeCache) HasSynced() bool { return c.synced }
func (c *fakeCache) HasUID(_, _ string, uid types.UID) bool {
	return c.uids[uid]
}

// clock is a settable clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time      { return c.now }
func (c *clock) add(d time.Duration) { c.now = c.now.Add(d) }
func newClock() *clock               { return &clock{now: time.Unix(1_000_000, 0)} }
func ann(uid, target string) Announcement {
	return Announcement{Namespace: "ns", Name: "l-" + uid, UID: types.UID(uid), Group: lockv1alpha1.Group, Kind: "Stack", Target: target}
}
func key(target string) lockv1alpha1.TargetKey {
	return lockv1alpha1.TargetKey{Namespace: "ns", Group: lockv1alpha1.Group, Kind: "Stack", Name: target}
}

// warmStandalone returns a standalone Tracker, warm (synced and listed),
// its clock and its cache.
func warmStandalone(t *testing.T) (*clock, *fakeCache, *Tracker) {
	t.Helper()
	c := newClock()
	cache := &fakeCache{synced: true, uids: map[types.UID]bool{}}
	tr := newTracker(trackerConfig{Standalone: true, Now: c.Now}, cache)
	tr.SetView(nil)
	c.add(time.Millisecond)
	warmUp(t, tr)
	return c, cache, tr
}

// warmUp lists (the only thing left for a standalone synced replica).
func warmUp(t *testing.T, tr *Tracker) {
	t.Helper()
	if !tr.NeedsList() {
		t.Fatalf("NeedsList() = false, want true (warm %v)", tr.Warm())
	}
	started := tr.Now()
	tr.Listed(started)
}

func TestStandaloneWarmsAfterSyncAndList(t *testing.T) {
	c := newClock()
	cache := &fakeCache{}
	tr := newTracker(trackerConfig{Standalone: true, Now: c.Now}, cache)
	tr.SetView(nil)
	if tr.Warm() {
		t.Fatal("warm before the informer synced")
	}
	if reason, may := tr.MayLack(key("a")); !may || reason != ReasonCold {
		t.Fatalf("MayLack before sync = %q, %v; want cold, true", reason, may)
	}
	if !tr.MayLackIn("ns") || !tr.MayLackIn("other") {
		t.Fatal("MayLackIn before sync: want true for every namespace (cold)")
	}
	cache.synced = true
	if tr.Warm() {
		t.Fatal("warm before the list")
	}
	c.add(time.Millisecond)
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm after sync and list")
	}
	if _, may := tr.MayLack(key("a")); may {
		t.Fatal("a warm replica with no marker must decide from the cache")
	}
	if tr.MayLackIn("ns") {
		t.Fatal("MayLackIn: a warm replica with no marker must decide from the cache")
	}
}

func TestMarkersAndTheirClearing(t *testing.T) {
	c, cache, tr := warmStandalone(t)

	tr.Mark(ann("u1", "a"))
	if reason, may := tr.MayLack(key("a")); !may || reason != ReasonMarker {
		t.Fatalf("MayLack(a) = %q, %v; want marker, true", reason, may)
	}
	if _, may := tr.MayLack(key("b")); may {
		t.Fatal("a marker of a must not make b's deletes confirmed")
	}
	if !tr.PendingCreate(key("a")) || tr.PendingCreate(key("b")) {
		t.Fatal("PendingCreate: want true for a only")
	}
	// Two creates on one target: the target stays marked until both are
	// delivered.
	tr.Mark(ann("u2", "a"))
	tr.Observe("u1")
	if _, may := tr.MayLack(key("a")); !may {
		t.Fatal("one of two markers delivered: a must stay marked")
	}
	if !tr.PendingIn("ns") || tr.PendingIn("other") {
		t.Fatal("PendingIn: want true for the markers' namespace ns only")
	}
	// MayLackIn is MayLack of every key of the namespace at once.
	if !tr.MayLackIn("ns") || tr.MayLackIn("other") {
		t.Fatal("MayLackIn: want true for the markers' namespace ns only")
	}
	tr.Observe("u2")
	if _, may := tr.MayLack(key("a")); may {
		t.Fatal("both delivered: a must be decided from the cache")
	}
	if tr.PendingCreate(key("a")) {
		t.Fatal("PendingCreate(a) after both markers were delivered: want false")
	}
	if tr.PendingIn("ns") {
		t.Fatal("PendingIn(ns) after both markers were delivered: want false (the namespace label follows the cache again)")
	}
	if tr.MayLackIn("ns") {
		t.Fatal("MayLackIn(ns) after both markers were delivered: want false")
	}
	// A Lock the cache holds already is not marked.
	cache.uids["u3"] = true
	tr.Mark(ann("u3", "c"))
	if tr.Markers() != 0 {
		t.Fatalf("Markers() = %d, want 0: the cache holds u3", tr.Markers())
	}
	// Expiry: only markers older than TTL are returned.
	tr.Mark(ann("u4", "d"))
	if got := tr.Expired(); len(got) != 0 {
		t.Fatalf("Expired() = %v before TTL", got)
	}
	c.add(DefaultTTL + time.Second)
	if got := tr.Expired(); len(got) != 1 || got[0].UID != "u4" {
		t.Fatalf("Expired() = %v, want u4", got)
	}
	tr.Clear(ann("u4", "d"))
	if tr.Markers() != 0 {
		t.Fatal("Clear did not remove u4")
	}
}

func TestMarkerBoundMakesTheReplicaCold(t *testing.T) {
	c := newClock()
	cache := &fakeCache{synced: true}
	tr := newTracker(trackerConfig{Standalone: true, MaxMarkers: 2, Now: c.Now}, cache)
	tr.SetView(nil)
	c.add(time.Millisecond)
	warmUp(t, tr)
	tr.Mark(ann("u1", "a"))
	tr.Mark(ann("u2", "b"))
	if !tr.Warm() {
		t.Fatal("cold at the bound")
	}
	tr.Mark(ann("u3", "c"))
	if reason, may := tr.MayLack(key("z")); !may || reason != ReasonCold {
		t.Fatalf("past the bound MayLack = %q, %v; want cold", reason, may)
	}
	// Cold for TTL, then a list that starts after it.
	c.add(DefaultTTL / 2)
	if tr.NeedsList() {
		t.Fatal("NeedsList within TTL of a lost marker")
	}
	c.add(DefaultTTL)
	tr.Observe("u1")
	tr.Observe("u2")
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm after the hold-off and a list")
	}
}

func TestPeersWarmColdStateMachine(t *testing.T) {
	c := newClock()
	cache := &fakeCache{synced: true}
	tr := newTracker(trackerConfig{Now: c.Now}, cache)
	tr.SetView([]string{"b:1", "c:1"})
	renew := func(peer string, resp SubscribeResponse) {
		sent := c.Now()
		c.add(10 * time.Millisecond)
		tr.Renewed(peer, sent, resp)
	}
	renew("b:1", SubscribeResponse{New: true, Complete: true})
	renew("c:1", SubscribeResponse{New: true, Complete: true, Recent: []Announcement{ann("u1", "a")}})
	if tr.NeedsList() || tr.Warm() {
		t.Fatal("a new replica must stay cold for TTL")
	}
	if tr.Markers() != 1 {
		t.Fatalf("the replay was not marked: %d markers", tr.Markers())
	}
	// Keep renewing through the hold-off.
	for c.Now().Before(time.Unix(1_000_000, 0).Add(DefaultTTL)) {
		c.add(DefaultRenewEvery)
		renew("b:1", SubscribeResponse{Complete: true})
		renew("c:1", SubscribeResponse{Complete: true})
	}
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm with both peers trusted after the hold-off and a list")
	}
	if reason, _ := tr.MayLack(key("a")); reason != ReasonMarker {
		t.Fatalf("the replayed create must keep a marked, got %q", reason)
	}

	// c stops answering: cold once the trust runs out (Trust after the
	// last renewal was sent), well before c's Lease would drop us.
	for range 3 {
		c.add(DefaultRenewEvery)
		renew("b:1", SubscribeResponse{Complete: true})
	}
	if !tr.Warm() {
		t.Fatal("cold too early")
	}
	c.add(DefaultRenewEvery)
	renew("b:1", SubscribeResponse{Complete: true})
	if tr.Warm() {
		t.Fatal("warm though c's subscription is no longer trusted")
	}
	// c answers again, as new (it restarted): a list is needed again.
	renew("c:1", SubscribeResponse{New: true, Complete: true})
	if tr.Warm() {
		t.Fatal("warm without a list after a broken chain")
	}
	c.add(time.Millisecond)
	warmUp(t, tr)
	if !tr.Warm() {
		t.Fatal("not warm after re-subscribing and a list")
	}

	// c leaves the view while trusted: nothing lost, still warm.
	tr.SetView([]string{"b:1"})
	if !tr.Warm() {
		t.Fatal("a trusted peer leaving the view must not make the replica cold")
	}
	// A new peer joins: cold until subscribed, then a list.
	tr.SetView([]string{"b:1", "d:1"})
	if tr.Warm() {
		t.Fatal("warm with an unsubscribed peer in the view")
	}
	renew("d:1", SubscribeResponse{New: true, Complete: true})
	if tr.Warm() {
		t.Fatal("warm without a list after a new peer joined")
	}
	c.add(time.Millisecond)
	warmUp(t, tr)
	// d dies without our trust, and leaves the view: cold for TTL.
	c.add(DefaultTrust + time.Second)
	renew("b:1", SubscribeResponse{Complete: true})
	tr.SetView([]string{"b:1"})
	c.add(time.Second)
	renew("b:1", SubscribeResponse{Complete: true})
	if tr.Warm() || tr.NeedsList() {
		t.Fatal("an untrusted peer left: the replica must stay cold for TTL")
	}
}

func TestAdmitNeedsEverySubscription(t *testing.T) {
	c := newClock()
	tr := newTracker(trackerConfig{Now: c.Now}, &fakeCache{synced: true})
	if _, err := tr.Admit(ann("u1", "a")); err == nil {
		t.Fatal("admitted before the view was known")
	}
	tr.SetView([]string{"b:1"})
	if _, err := tr.Admit(ann("u1", "a")); err == nil {
		t.Fatal("admitted with b not subscribed")
	}
	if _, err := tr.Subscribe("b:1"); err != nil {
		t.Fatal(err)
	}
	subs, err := tr.Admit(ann("u1", "a"))
	if err != nil || len(subs) != 1 || subs[0] != "b:1" {
		t.Fatalf("Admit = %v, %v; want [b:1]", subs, err)
	}
	// A renewal is not new and replays nothing; a new subscriber gets the
	// replay.
	if resp, _ := tr.Subscribe("b:1"); resp.New || len(resp.Recent) != 0 {
		t.Fatalf("renewal answered %+v", resp)
	}
	// Only a replica in the view may subscribe.
	if _, err := tr.Subscribe("x:1"); err == nil {
		t.Fatal("a subscription from an address not in the view was accepted")
	}
	tr.SetView([]string{"b:1", "e:1", "f:1", "g:1"})
	if resp, _ := tr.Subscribe("e:1"); !resp.New || !resp.Complete || len(resp.Recent) != 1 {
		t.Fatalf("new subscription answered %+v, want the replay of u1", resp)
	}
	// A create refused after Admit (a subscriber could not be told) keeps
	// its marker and its replay until the sweep: a refusal can be forged.
	tr.Subscribe("f:1")
	tr.Subscribe("g:1")
	if _, err := tr.Admit(ann("u9", "z")); err != nil {
		t.Fatal(err)
	}
	if n := tr.Markers(); n != 2 {
		t.Fatalf("%d markers, want u1 and the refused u9: a refused create keeps its marker until the sweep", n)
	}
	tr.SetView([]string{"b:1", "e:1", "f:1", "g:1", "h:1"})
	if resp, _ := tr.Subscribe("h:1"); len(resp.Recent) != 2 {
		t.Fatalf("replay holds %d admissions, want u1 and the refused u9", len(resp.Recent))
	}
	// b's lease runs out: creates are refused again.
	c.add(DefaultLease + time.Second)
	if _, err := tr.Admit(ann("u2", "a")); err == nil {
		t.Fatal("admitted after b's lease ran out")
	}
	// The replay forgets admissions older than TTL.
	c.add(DefaultTTL)
	tr.SetView([]string{"b:1", "i:1"})
	if resp, _ := tr.Subscribe("i:1"); len(resp.Recent) != 0 {
		t.Fatalf("replay of %d admissions older than TTL", len(resp.Recent))
	}
}

func TestAnnouncementValidation(t *testing.T) {
	if err := ann("u", "a").validate(); err != nil {
		t.Fatal(err)
	}
	bad := ann("u", "a")
	bad.Group = "apps"
	if bad.validate() == nil {
		t.Fatal("an announcement of another group validated")
	}
	empty := ann("", "a")
	if empty.validate() == nil {
		t.Fatal("an announcement without UID validated")
	}
}
