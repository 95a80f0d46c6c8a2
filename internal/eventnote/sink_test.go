package eventnote

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// recordingSink is an events.EventSink that records what it was asked to
// write.
type recordingSink struct{ writes []string }

func (r *recordingSink) Create(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	r.writes = append(r.writes, "create "+ev.Namespace)
	return ev, nil
}

func (r *recordingSink) Update(_ context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	r.writes = append(r.writes, "update "+ev.Namespace)
	return ev, nil
}

func (r *recordingSink) Patch(_ context.Context, ev *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	r.writes = append(r.writes, "patch "+ev.Namespace)
	return ev, nil
}

func TestSinkDropsEventsOfGoneNamespaces(t *testing.T) {
	live := map[string]bool{"live": true}
	next := &recordingSink{}
	s := Sink(next, func(_ context.Context, ns string) bool { return live[ns] })
	ctx := t.Context()
	for _, ns := range []string{"live", "gone"} {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "e"}}
		for op, write := range map[string]func() (*eventsv1.Event, error){
			"create": func() (*eventsv1.Event, error) { return s.Create(ctx, ev) },
			"update": func() (*eventsv1.Event, error) { return s.Update(ctx, ev) },
			"patch":  func() (*eventsv1.Event, error) { return s.Patch(ctx, ev, []byte(`{}`)) },
		} {
			// A dropped Event is reported as written: client-go's
			// broadcaster would retry an error other than a
			// StatusError, and log any.
			if got, err := write(); err != nil || got != ev {
				t.Errorf("%s of an Event in namespace %q = %v, %v; want the Event, nil", op, ns, got, err)
			}
		}
	}
	want := []string{"create live", "patch live", "update live"}
	got := slices.Sorted(slices.Values(next.writes))
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("writes that reached the API server's sink (-want +got):\n%s", diff)
	}
}

// patchSink is an events.EventSink that records the patches it was asked
// to write, and answers them with err.
type patchSink struct {
	recordingSink
	patches []string
	err     error
}

func (p *patchSink) Patch(_ context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	p.patches = append(p.patches, ev.Name+" "+string(data))
	return ev, p.err
}

func TestSinkDropsARepeatedSeriesPatch(t *testing.T) {
	now := time.Date(2026, 12, 6, 21, 9, 11, 0, time.UTC)
	next := &patchSink{}
	s := Sink(next, func(context.Context, string) bool { return true }).(*sink)
	s.now = func() time.Time { return now }
	ctx := t.Context()
	ev := func(name string) *eventsv1.Event {
		return &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}
	}
	// What client-go's broadcaster sends: a series' first patch (count 2)
	// at once, and the final count up to twelve minutes later.
	two := []byte(`{"series":{"count":2,"lastObservedTime":"2026-12-06T21:09:11.040000Z"}}`)
	five := []byte(`{"series":{"count":5,"lastObservedTime":"2026-12-06T21:09:15.000000Z"}}`)
	steps := []struct {
		reason string
		name   string
		data   []byte
		after  time.Duration
		drop   bool
	}{
		{"a series' first patch is written", "a", two, 0, false},
		{"the same patch as the final count of a series that did not repeat is dropped", "a", two, 11 * time.Minute, true},
		{"the same patch once more is written: the sink forgot it when it dropped it", "a", two, time.Second, false},
		{"another Event's identical patch is its own: written", "b", two, 0, false},
		{"a series that repeated after its first patch: its final count is written", "b", five, 6 * time.Minute, false},
		{"a patch remembered longer than patchMemory ago is written", "b", five, patchMemory + time.Second, false},
	}
	var want []string
	for _, st := range steps {
		now = now.Add(st.after)
		before := len(next.patches)
		if got, err := s.Patch(ctx, ev(st.name), st.data); err != nil || got.Name != st.name {
			t.Fatalf("%s: Patch = %v, %v; want the Event, nil", st.reason, got, err)
		}
		if st.drop {
			if len(next.patches) != before {
				t.Errorf("%s: the patch reached the API server's sink", st.reason)
			}
			continue
		}
		want = append(want, st.name+" "+string(st.data))
	}
	if diff := cmp.Diff(want, next.patches); diff != "" {
		t.Errorf("patches that reached the API server's sink (-want +got):\n%s", diff)
	}
}

func TestSinkRemembersOnlyWrittenPatches(t *testing.T) {
	next := &patchSink{err: errors.New("connection refused")}
	s := Sink(next, func(context.Context, string) bool { return true })
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"}}
	data := []byte(`{"series":{"count":2}}`)
	for range 2 {
		if _, err := s.Patch(t.Context(), ev, data); err == nil {
			t.Fatal("Patch hid the API server's error")
		}
	}
	if len(next.patches) != 2 {
		t.Errorf("a patch whose write failed was dropped when sent again: %d of 2 reached the sink", len(next.patches))
	}
}

func TestSinkBoundsWhatItRemembers(t *testing.T) {
	next := &patchSink{}
	s := Sink(next, func(context.Context, string) bool { return true }).(*sink)
	data := []byte(`{"series":{"count":2}}`)
	for i := range maxPatches + 10 {
		ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: strconv.Itoa(i)}}
		if _, err := s.Patch(t.Context(), ev, data); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.patched) != maxPatches {
		t.Errorf("the sink remembers %d patches, want at most %d", len(s.patched), maxPatches)
	}
	// Past the bound, a repeat is written: a write for nothing, no count lost.
	ev := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: strconv.Itoa(maxPatches + 5)}}
	before := len(next.patches)
	if _, err := s.Patch(t.Context(), ev, data); err != nil || len(next.patches) != before+1 {
		t.Errorf("a repeat of a patch the sink could not remember was not written (err %v)", err)
	}
}
