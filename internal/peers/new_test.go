package peers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/webhook"
)

// deliveringCache is a fakeCache that keeps the function OnDelivered
// was given.
type deliveringCache struct {
	fakeCache
	delivered func(types.UID)
	err       error
}

func (c *deliveringCache) OnDelivered(fn func(types.UID)) error {
	c.delivered = fn
	return c.err
}

// TestNew: the one constructor builds the whole of a replica's side: it
// follows the Lock informer's deliveries (a marker goes once its Lock is
// delivered), registers the protocol's metrics under their names, and
// serves the peer endpoints from one handler, at Paths and nowhere else;
// without what it cannot work without, it returns an error.
func TestNew(t *testing.T) {
	locks := &deliveringCache{fakeCache: fakeCache{synced: true, uids: map[types.UID]bool{}}}
	reg := prometheus.NewRegistry()
	entry := EntryConfig{Client: fake.NewClientset(), Configuration: "lockguard", Want: Expectation{URL: "https://127.0.0.1:9443"}}
	if _, err := New(Config{Standalone: true, Locks: locks, Entry: entry, Registerer: reg}); err == nil {
		t.Fatal("New without a reader of the API server: no error")
	}
	p, err := New(Config{Standalone: true, Locks: locks, API: noReader{}, Entry: entry, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}

	if locks.delivered == nil {
		t.Fatal("New did not follow the Lock informer's deliveries")
	}
	p.t.Mark(ann("u1", "db"))
	locks.delivered("u1")
	if n := p.t.Markers(); n != 0 {
		t.Errorf("after the informer delivered the Lock: %d markers, want 0", n)
	}

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	want := []string{"lockguard_confirmations_total", "lockguard_create_entry_valid", "lockguard_lock_creates_refused_total", "lockguard_pending_markers", "lockguard_replica_warm"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("metrics registered by New: -want, +got:\n%s", diff)
	}

	if diff := cmp.Diff([]string{SubscribePath, PendingPath}, Paths()); diff != "" {
		t.Errorf("Paths(): -want, +got:\n%s", diff)
	}
	for _, path := range append(Paths(), "/peers/other", webhook.CreatePath) {
		w := httptest.NewRecorder()
		p.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}")))
		switch served := slices.Contains(Paths(), path); {
		case served && w.Code != http.StatusForbidden:
			// No Authenticate in the Config: every call is refused.
			t.Errorf("POST %s answered %d, want 403 (an unauthenticated call)", path, w.Code)
		case !served && w.Code != http.StatusNotFound:
			t.Errorf("POST %s answered %d, want 404 (not a peer endpoint)", path, w.Code)
		}
	}

	locks.err = errors.New("informer stopped")
	if _, err := New(Config{Standalone: true, Locks: locks, API: noReader{}, Entry: entry}); err == nil {
		t.Error("New when the Lock informer cannot be followed: no error")
	}
	if _, err := New(Config{Standalone: true, Locks: &deliveringCache{}, API: noReader{}}); err == nil {
		t.Error("New without the Lock-create entry: no error")
	}
}

// noReader is a Reader for a test that reads nothing.
type noReader struct{ client.Reader }
