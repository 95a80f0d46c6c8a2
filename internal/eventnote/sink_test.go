package eventnote

import (
	"context"
	"slices"
	"testing"

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
