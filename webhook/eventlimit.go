package webhook

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// EventLimits bound the DeleteBlocked Events lockguard records. The
// webhook answers any well-formed review from anyone who can reach it, so
// a flood of forged reviews of a locked object would otherwise be a flood
// of Events. client-go's events.k8s.io recorder (what controller-runtime's
// GetEventRecorder returns) has no rate limit: it folds repeats of an Event
// into a series only when everything but the note is equal, and the UID of
// the regarding object comes from the review, so a forger defeats it by
// changing the UID.
type EventLimits struct {
	// Burst is how many Events one object (the target, or one Lock) gets
	// at once. Default 10.
	Burst int
	// Every is how often one more is allowed after the burst. Default 30s.
	Every time.Duration
	// TotalBurst and TotalEvery bound all Events together. Default 50 and
	// 200ms (5 per second).
	TotalBurst int
	TotalEvery time.Duration
	// MaxObjects bounds the objects tracked; beyond it, objects with a
	// full bucket are forgotten, and Events of new ones are dropped until
	// there is room. Default 4096.
	MaxObjects int
}

func (l EventLimits) withDefaults() EventLimits {
	if l.Burst <= 0 {
		l.Burst = 10
	}
	if l.Every <= 0 {
		l.Every = 30 * time.Second
	}
	if l.TotalBurst <= 0 {
		l.TotalBurst = 50
	}
	if l.TotalEvery <= 0 {
		l.TotalEvery = 200 * time.Millisecond
	}
	if l.MaxObjects <= 0 {
		l.MaxObjects = 4096
	}
	return l
}

// bucket is a token bucket: tokens as of last.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill adds the tokens earned since last, up to burst.
func (b *bucket) refill(now time.Time, burst int, every time.Duration) {
	b.tokens = min(float64(burst), b.tokens+float64(now.Sub(b.last))/float64(every))
	b.last = now
}

// limitedRecorder is an EventRecorder that drops the Events over its
// limits, per regarding object and in total, and counts them.
type limitedRecorder struct {
	next    events.EventRecorder
	limits  EventLimits
	metrics *Metrics
	now     func() time.Time

	mu      sync.Mutex
	total   bucket
	objects map[string]*bucket
}

func newLimitedRecorder(r events.EventRecorder, l EventLimits, m *Metrics, now func() time.Time) *limitedRecorder {
	l = l.withDefaults()
	return &limitedRecorder{
		next: r, limits: l, metrics: m, now: now,
		total:   bucket{tokens: float64(l.TotalBurst), last: now()},
		objects: map[string]*bucket{},
	}
}

// Eventf records the Event unless the regarding object or all Events
// together are over their limits.
func (r *limitedRecorder) Eventf(regarding runtime.Object, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if !r.allow(objectKey(regarding)) {
		r.metrics.dropEvent()
		return
	}
	r.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

// allow takes a token from the bucket of key and from the total, or
// reports that one of them has none.
func (r *limitedRecorder) allow(key string) bool {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total.refill(now, r.limits.TotalBurst, r.limits.TotalEvery)
	b := r.objects[key]
	if b == nil {
		if len(r.objects) >= r.limits.MaxObjects {
			r.forgetFull(now)
		}
		if len(r.objects) >= r.limits.MaxObjects {
			return false
		}
		b = &bucket{tokens: float64(r.limits.Burst), last: now}
		r.objects[key] = b
	}
	b.refill(now, r.limits.Burst, r.limits.Every)
	if b.tokens < 1 || r.total.tokens < 1 {
		return false
	}
	b.tokens--
	r.total.tokens--
	return true
}

// forgetFull drops the buckets that have refilled: a new bucket starts
// full, so forgetting them changes nothing.
func (r *limitedRecorder) forgetFull(now time.Time) {
	for k, b := range r.objects {
		b.refill(now, r.limits.Burst, r.limits.Every)
		if b.tokens >= float64(r.limits.Burst) {
			delete(r.objects, k)
		}
	}
}

// objectKey identifies the regarding object of an Event: its Go type, its
// kind as its TypeMeta says (objects from a cache have none), namespace and
// name; not its UID, which a forged review chooses.
func objectKey(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Sprintf("%T", obj)
	}
	return fmt.Sprintf("%T/%s/%s/%s", obj, obj.GetObjectKind().GroupVersionKind().GroupKind(), m.GetNamespace(), m.GetName())
}
