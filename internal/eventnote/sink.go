package eventnote

import (
	"context"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
)

// Sink returns an EventSink that writes through next, except two kinds
// of write for nothing:
//
//   - the Events of a namespace that live says is gone or terminating: the
//     API server would refuse them (404, or 403 NamespaceTerminating). It
//     matters because client-go's broadcaster writes a series' final count
//     up to twelve minutes after its last repeat (events.k8s.io's
//     finishSeries, every six minutes, for a series idle six), and each
//     write to a namespace that is gone is a PATCH and then a POST: make
//     test at 52d8588 saw 29 such pairs, all 404, land in namespaces
//     deleted minutes before, in a quiet minute (e2e
//     Test13StatusTruthAndQuietMinute). live sees the Event's namespace
//     ("default" for a cluster-scoped regarding object) and must answer
//     true when it cannot tell.
//   - a series patch identical to the last one written to the same Event:
//     the final count of a series that did not repeat after its first
//     patch (count 2) is that patch again, written up to twelve minutes
//     later into a cluster with nothing to say (make test at 09af3fe saw
//     one in Test13's quiet minute, 11m48s after its Event's last write).
//     A series that did repeat has a higher count, and is written.
//
// An Event that is dropped is reported as written, so that the broadcaster
// neither retries it nor logs an error, and logged at V(1).
func Sink(next events.EventSink, live func(ctx context.Context, namespace string) bool) events.EventSink {
	return &sink{next: next, live: live, now: time.Now}
}

// The sink's memory of the series patches it wrote: an entry is kept for
// patchMemory (longer than a series can wait for its final count), for at
// most maxPatches Events (beyond, a repeat is written: a write for
// nothing, never a count lost).
const (
	patchMemory = 15 * time.Minute
	maxPatches  = 10000
)

type sink struct {
	next events.EventSink
	live func(context.Context, string) bool
	now  func() time.Time

	mu      sync.Mutex
	patched map[types.NamespacedName]patchRecord // by Event
	pruned  time.Time
}

// patchRecord is a series patch the sink wrote, and when.
type patchRecord struct {
	data string
	at   time.Time
}

// dropped reports whether ev is not to be written, logging it if so.
func (s *sink) dropped(ctx context.Context, ev *eventsv1.Event) bool {
	if s.live(ctx, ev.Namespace) {
		return false
	}
	logr.FromContextOrDiscard(ctx).V(1).Info("Not writing an Event: its namespace is gone or terminating",
		"namespace", ev.Namespace, "event", ev.Name, "reason", ev.Reason)
	return true
}

// Create creates ev unless its namespace is gone or terminating.
func (s *sink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if s.dropped(ctx, ev) {
		return ev, nil
	}
	return s.next.Create(ctx, ev)
}

// Update updates ev unless its namespace is gone or terminating.
func (s *sink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if s.dropped(ctx, ev) {
		return ev, nil
	}
	return s.next.Update(ctx, ev)
}

// Patch patches ev (a series' count) unless its namespace is gone or
// terminating, or the same patch was the last one written to it.
func (s *sink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	if s.dropped(ctx, ev) {
		return ev, nil
	}
	key := types.NamespacedName{Namespace: ev.Namespace, Name: ev.Name}
	if s.repeat(key, data) {
		logr.FromContextOrDiscard(ctx).V(1).Info("Not writing an Event's series: the same patch was written last",
			"namespace", ev.Namespace, "event", ev.Name, "reason", ev.Reason)
		return ev, nil
	}
	out, err := s.next.Patch(ctx, ev, data)
	if err == nil {
		s.wrote(key, data)
	}
	return out, err
}

// repeat reports whether data is the patch last written to key, and
// forgets it if so: the broadcaster sends it again only to end the series,
// after which it forgets the Event too.
func (s *sink) repeat(key types.NamespacedName, data []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.patched[key]
	if !ok || r.data != string(data) || s.now().Sub(r.at) > patchMemory {
		return false
	}
	delete(s.patched, key)
	return true
}

// wrote remembers data as the patch last written to key, pruning the
// entries older than patchMemory at most once a minute.
func (s *sink) wrote(key types.NamespacedName, data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if now.Sub(s.pruned) > time.Minute {
		s.pruned = now
		maps.DeleteFunc(s.patched, func(_ types.NamespacedName, r patchRecord) bool { return now.Sub(r.at) > patchMemory })
	}
	if s.patched == nil {
		s.patched = make(map[types.NamespacedName]patchRecord)
	}
	if _, ok := s.patched[key]; !ok && len(s.patched) >= maxPatches {
		return
	}
	s.patched[key] = patchRecord{data: string(data), at: now}
}
