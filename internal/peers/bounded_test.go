package peers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// retainedBytes is what t's markers and its replay hold of what callers
// sent: the bytes of every announcement's fields.
func retainedBytes(t *Tracker) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	size := func(a Announcement) int {
		return len(a.Namespace) + len(a.Name) + len(a.UID) + len(a.Group) + len(a.Kind) + len(a.Target)
	}
	n := 0
	for _, m := range t.markers.byID {
		n += size(m.a)
	}
	for _, r := range t.recent {
		n += size(r.a)
	}
	return n
}

// TestForgedCreatesRetainNothing is issue 36's second attack: a caller
// that reaches the webhook port sends Lock-create reviews the API server
// would never send (it validates a Lock's metadata and spec before
// admission): 48 with 1 MiB names, and names, namespaces, UIDs and
// targets that no Lock can have. Before the fix each was allowed, marked
// and kept for replay (+48 MiB) and labelled its namespace. None may be
// marked, kept or labelled: each is refused as a bad request.
func TestForgedCreatesRetainNothing(t *testing.T) {
	_, _, tr := warmStandalone(t)
	var labelled []string
	admit := webhook.NewCreateHandler(webhook.CreateOptions{
		Announcer: newPeers(tr, nil, Config{}),
		Labeler: webhook.NamespaceLabelerFunc(func(_ context.Context, ns string) error {
			labelled = append(labelled, ns)
			return nil
		}),
	})
	mib := strings.Repeat("a", 1<<20)
	var forged []Announcement
	for i := range 48 {
		forged = append(forged, Announcement{Namespace: "ns", Name: fmt.Sprintf("%s%d", mib, i), UID: types.UID(fmt.Sprintf("u%d", i)), Group: lockv1alpha1.Group, Kind: "Stack", Target: "db"})
	}
	valid := ann("v", "db")
	for _, edit := range []func(*Announcement){
		func(a *Announcement) { a.Name = "a/b" },
		func(a *Announcement) { a.Name = "a%2Fb" },
		func(a *Announcement) { a.Name = "UPPER" },
		func(a *Announcement) { a.Namespace = "a/b" },
		func(a *Announcement) { a.Namespace = mib },
		func(a *Announcement) { a.UID = types.UID(mib) },
		func(a *Announcement) { a.Target = mib },
		func(a *Announcement) { a.Kind = "S" + mib },
		func(a *Announcement) { a.Kind = "Stack/x" },
	} {
		a := valid
		edit(&a)
		forged = append(forged, a)
	}
	var allowed int
	for _, a := range forged {
		resp := admit.Handle(context.Background(), lockCreate(t, a))
		if resp.Allowed || resp.Result.Code != http.StatusBadRequest {
			allowed++
		}
	}
	type state struct {
		NotRefused, Markers, Retained int
		Labelled                      []string
	}
	got := state{NotRefused: allowed, Markers: tr.Markers(), Retained: retainedBytes(tr), Labelled: labelled}
	if diff := cmp.Diff(state{}, got); diff != "" {
		// The label list would print every 1 MiB name: its length says enough.
		t.Errorf("after %d forged Lock-create reviews: -want, +got:\n%s", len(forged), firstLines(diff, 12))
	}
	// The replay of a subscription made now holds none of them.
	tr.SetView([]string{"late:1"})
	if resp, err := tr.Subscribe("late:1"); err != nil || len(resp.Recent) != 0 {
		t.Errorf("replay after the forged creates: %d announcements, %v; want none", len(resp.Recent), err)
	}
}

// firstLines cuts s to n lines of at most 200 bytes.
func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	lines = lines[:min(len(lines), n)]
	for i, l := range lines {
		if len(l) > 200 {
			lines[i] = l[:200] + "..."
		}
	}
	return strings.Join(lines, "\n")
}

// getReader is a Reader whose GET of a Lock answers get(key); List lists
// nothing.
type getReader func(key client.ObjectKey) error

func (g getReader) Get(_ context.Context, key client.ObjectKey, _ client.Object, _ ...client.GetOption) error {
	return g(key)
}

func (g getReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// TestSweepClearsMarkersThatCanNeverBeLocks is issue 36's sweep attack: a
// marker whose Lock name or namespace no Lock can have (a slash, a
// percent sign, over 253 bytes) was never swept, since the quorum GET of
// its Lock fails without NotFound (client-go refuses the name, the API
// server answers 414 or 400); the leader kept the has-locks label of its
// namespace (PendingIn) for good, and enough of them held every replica
// over the marker bound, cold. Such a marker is cleared after TTL without
// a GET. A marker of a valid name whose GET fails otherwise stays: the
// Lock may exist and the cache lack it (fail closed).
func TestSweepClearsMarkersThatCanNeverBeLocks(t *testing.T) {
	locksGR := schema.GroupResource{Group: lockv1alpha1.Group, Resource: "locks"}
	cases := map[string]struct {
		reason  string
		mark    Announcement
		get     error
		want    bool // the marker is still there after the sweep
		wantGet bool // the sweep read the Lock
	}{
		"Slash": {
			reason: "client-go refuses a name with a slash before any request: no Lock can have it.",
			mark:   Announcement{Namespace: "ns", Name: "a/b", UID: "u1", Group: lockv1alpha1.Group, Kind: "Stack", Target: "db"},
			get:    errors.New(`invalid resource name "a/b": [may not contain '/']`),
		},
		"Percent": {
			reason: "A name with a percent sign is no DNS subdomain.",
			mark:   Announcement{Namespace: "ns", Name: "a%2Fb", UID: "u1", Group: lockv1alpha1.Group, Kind: "Stack", Target: "db"},
			get:    apierrors.NewBadRequest("invalid name"),
		},
		"OneMiB": {
			reason: "The API server answers a 1 MiB name's GET with 414.",
			mark:   Announcement{Namespace: "ns", Name: strings.Repeat("a", 1<<20), UID: "u1", Group: lockv1alpha1.Group, Kind: "Stack", Target: "db"},
			get:    apierrors.NewGenericServerResponse(http.StatusRequestURITooLong, "get", locksGR, "", "", 0, false),
		},
		"BadNamespace": {
			reason: "A namespace that is no DNS label never holds a Lock.",
			mark:   Announcement{Namespace: "a/b", Name: "keep", UID: "u1", Group: lockv1alpha1.Group, Kind: "Stack", Target: "db"},
			get:    errors.New(`invalid namespace "a/b"`),
		},
		"GoneNamespace": {
			reason: "The GET of a Lock of a namespace that is gone is NotFound: cleared, as before.",
			mark:   ann("u1", "db"),
			get:    apierrors.NewNotFound(locksGR, "l-u1"), wantGet: true,
		},
		"Unavailable": {
			reason: "A valid Lock name whose GET fails (the API server unavailable) keeps its marker: the Lock may exist.",
			mark:   ann("u1", "db"),
			get:    apierrors.NewServiceUnavailable("etcd is down"), want: true, wantGet: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c, _, tr := warmStandalone(t)
			tr.mu.Lock()
			tr.markers.add(tc.mark, c.Now()) // as a replica of today's code would have
			tr.mu.Unlock()
			var read bool
			p := newPeers(tr, getReader(func(client.ObjectKey) error {
				read = true
				return tc.get
			}), Config{})
			c.add(DefaultTTL + time.Second)
			p.sweep(context.Background())
			got := struct{ Kept, Pending, Read bool }{tr.Markers() == 1, tr.PendingIn(tc.mark.Namespace), read}
			want := struct{ Kept, Pending, Read bool }{tc.want, tc.want, tc.wantGet}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nsweep(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
