package peers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestUnauthenticatedCallsAreRefused is issue 22's attacks 1 and 2 from a
// pod that reaches the webhook port: a subscription (which would answer
// with every pending Lock create, UIDs included, and make this replica
// wait for a subscriber that never answers) and an announcement (which
// would mark a target), both without a client certificate. Neither may
// change the replica's state or tell the caller anything.
func TestUnauthenticatedCallsAreRefused(t *testing.T) {
	c := newClock()
	tr := newTracker(trackerConfig{Now: c.Now}, &fakeCache{synced: true, uids: map[types.UID]bool{}})
	tr.SetView(nil)
	if _, err := tr.Admit(ann("u1", "db")); err != nil {
		t.Fatal(err)
	}
	p := newPeers(tr, nil, Config{})

	sub := httptest.NewRequest(http.MethodPost, SubscribePath, strings.NewReader(`{"address":"127.0.0.1:1"}`))
	sub.RemoteAddr = "127.0.0.1:40000"
	w := httptest.NewRecorder()
	p.ServeHTTP(w, sub)
	if w.Code != http.StatusForbidden {
		t.Errorf("unauthenticated subscribe answered %d, want 403", w.Code)
	}
	if strings.Contains(w.Body.String(), "u1") {
		t.Errorf("unauthenticated subscribe was told of a pending create: %s", w.Body.String())
	}
	// The squatted subscription would make the next create wait for it.
	if subs, err := tr.Admit(ann("u2", "web")); err != nil || len(subs) != 0 {
		t.Errorf("after an unauthenticated subscribe, Admit = %v, %v; want no subscriber to tell", subs, err)
	}

	pend := httptest.NewRequest(http.MethodPost, PendingPath, strings.NewReader(
		`{"namespace":"ns","name":"l-x","uid":"x","group":"core.navique.com","kind":"Stack","target":"cache"}`))
	pend.RemoteAddr = "127.0.0.1:40001"
	w = httptest.NewRecorder()
	before := tr.Markers()
	p.ServeHTTP(w, pend)
	if w.Code != http.StatusForbidden {
		t.Errorf("unauthenticated pending answered %d, want 403", w.Code)
	}
	if tr.Markers() != before {
		t.Errorf("an unauthenticated announcement changed the markers: %d, was %d", tr.Markers(), before)
	}
}
