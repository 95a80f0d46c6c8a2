package webhook

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// countingRecorder counts Events by regarding object.
type countingRecorder struct {
	mu     sync.Mutex
	counts map[string]int
}

func (r *countingRecorder) Eventf(regarding, _ runtime.Object, _, _, _, _ string, _ ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[objectKey(regarding)]++
}

// fakeClock is a clock moved by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

// TestEventLimits sends forged denied reviews of one locked Stack, each
// with a new UID (which defeats client-go's aggregation into a series),
// and checks how many Events the target and its Lock get, and how many are
// dropped and counted.
func TestEventLimits(t *testing.T) {
	type want struct {
		Target, Lock int // Events recorded on each
		Dropped      float64
	}
	cases := map[string]struct {
		reason  string
		limits  EventLimits
		reviews int
		advance time.Duration // before the last round of reviews
		more    int           // reviews after advance
		want    want
	}{
		"Burst": {
			reason:  "1000 denials at once: the burst of 10 per object, the other 990 Events of each object dropped.",
			limits:  EventLimits{Burst: 10, Every: 30 * time.Second, TotalBurst: 1000, TotalEvery: time.Millisecond},
			reviews: 1000,
			want:    want{Target: 10, Lock: 10, Dropped: 2 * 990},
		},
		"Refill": {
			reason:  "After the burst, one more per object every 30 s: 90 s later, 3 more each.",
			limits:  EventLimits{Burst: 10, Every: 30 * time.Second, TotalBurst: 1000, TotalEvery: time.Millisecond},
			reviews: 100, advance: 90 * time.Second, more: 100,
			want: want{Target: 13, Lock: 13, Dropped: 2 * (90 + 97)},
		},
		"Total": {
			reason:  "The total bucket bounds every object together: 4 Events, the target's first then its Lock's, then the target's second, its Lock's second.",
			limits:  EventLimits{Burst: 10, Every: 30 * time.Second, TotalBurst: 4, TotalEvery: time.Hour},
			reviews: 50,
			want:    want{Target: 2, Lock: 2, Dropped: 2*50 - 4},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec := &countingRecorder{counts: map[string]int{}}
			m := NewMetrics()
			if err := m.Register(prometheus.NewRegistry()); err != nil {
				t.Fatal(err)
			}
			clock := &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
			h := NewHandler(Config{Locks: indexOf(t, forgeStack, lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "l"}}), Metrics: m})
			h.finish.events = newLimitedRecorder(rec, tc.limits, m, clock.now)
			deny := func(n int) {
				for i := range n {
					req := request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", "")
					req.OldObject.Metadata.UID = types.UID(fmt.Sprintf("forged-%d", i))
					if resp := h.Decide(context.Background(), req); resp.Allowed {
						t.Fatal("the delete of a locked Stack was allowed")
					}
				}
			}
			deny(tc.reviews)
			clock.t = clock.t.Add(tc.advance)
			deny(tc.more)

			target := objectKey(&metav1.PartialObjectMetadata{
				TypeMeta:   metav1.TypeMeta{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "forge"},
			})
			lock := objectKey(&lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "l"}})
			got := want{Target: rec.counts[target], Lock: rec.counts[lock], Dropped: testutil.ToFloat64(m.eventsDropped)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nEvents of %d then %d denials: -want, +got:\n%s", tc.reason, tc.reviews, tc.more, diff)
			}
		})
	}
}

// TestEventLimitsObjects: the objects tracked are bounded; once that many
// have used their burst, a new object's Events are dropped until one of
// them has refilled and is forgotten.
func TestEventLimitsObjects(t *testing.T) {
	rec := &countingRecorder{counts: map[string]int{}}
	clock := &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	l := newLimitedRecorder(rec, EventLimits{Burst: 1, Every: time.Minute, TotalBurst: 100, TotalEvery: time.Millisecond, MaxObjects: 2}, nil, clock.now)
	obj := func(name string) runtime.Object {
		return &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	l.Eventf(obj("a"), nil, "Warning", ReasonDeleteBlocked, "Delete", "x")
	l.Eventf(obj("b"), nil, "Warning", ReasonDeleteBlocked, "Delete", "x")
	l.Eventf(obj("c"), nil, "Warning", ReasonDeleteBlocked, "Delete", "x") // No room: dropped.
	if got := len(l.objects); got != 2 {
		t.Errorf("objects tracked: %d, want 2", got)
	}
	clock.t = clock.t.Add(time.Minute) // a and b have refilled.
	l.Eventf(obj("c"), nil, "Warning", ReasonDeleteBlocked, "Delete", "x")
	want := map[string]int{objectKey(obj("a")): 1, objectKey(obj("b")): 1, objectKey(obj("c")): 1}
	if diff := cmp.Diff(want, rec.counts); diff != "" {
		t.Errorf("Events by object: -want, +got:\n%s", diff)
	}
	if got := len(l.objects); got != 1 {
		t.Errorf("objects tracked after the full ones were forgotten: %d, want 1", got)
	}
}
