package eventnote

import (
	"context"

	"github.com/go-logr/logr"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"
)

// Sink returns an EventSink that writes through next, except the Events
// of a namespace that live says is gone or terminating: the API server
// would refuse them (404, or 403 NamespaceTerminating), so writing them
// is a write for nothing. It matters because client-go's broadcaster
// writes a series' final count up to six minutes after its last repeat
// (events.k8s.io's finishSeries), and each write to a namespace that is
// gone is a PATCH and then a POST: make test at 52d8588 saw 29 such pairs,
// all 404, land in namespaces deleted minutes before, in a quiet minute
// (e2e Test13StatusTruthAndQuietMinute). An Event that is dropped is
// reported as written, so that the broadcaster neither retries it nor
// logs an error, and logged at V(1). live sees the Event's namespace
// ("default" for a cluster-scoped regarding object) and must answer true
// when it cannot tell.
func Sink(next events.EventSink, live func(ctx context.Context, namespace string) bool) events.EventSink {
	return sink{next: next, live: live}
}

type sink struct {
	next events.EventSink
	live func(context.Context, string) bool
}

// dropped reports whether ev is not to be written, logging it if so.
func (s sink) dropped(ctx context.Context, ev *eventsv1.Event) bool {
	if s.live(ctx, ev.Namespace) {
		return false
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("Not writing an Event: its namespace is gone or terminating",
		"namespace", ev.Namespace, "event", ev.Name, "reason", ev.Reason)
	return true
}

// Create creates ev unless its namespace is gone or terminating.
func (s sink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if s.dropped(ctx, ev) {
		return ev, nil
	}
	return s.next.Create(ctx, ev)
}

// Update updates ev unless its namespace is gone or terminating.
func (s sink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if s.dropped(ctx, ev) {
		return ev, nil
	}
	return s.next.Update(ctx, ev)
}

// Patch patches ev (a series' count) unless its namespace is gone or
// terminating.
func (s sink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if s.dropped(ctx, ev) {
		return ev, nil
	}
	return s.next.Patch(ctx, ev, data)
}
