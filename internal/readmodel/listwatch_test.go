package readmodel

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// scriptedLW answers its lists and watches with errs in turn, then with
// success.
type scriptedLW struct {
	errs  []error
	calls int
}

func (s *scriptedLW) next() error {
	s.calls++
	if s.calls <= len(s.errs) {
		return s.errs[s.calls-1]
	}
	return nil
}

func (s *scriptedLW) List(metav1.ListOptions) (runtime.Object, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return &metav1.List{}, nil
}

func (s *scriptedLW) Watch(metav1.ListOptions) (watch.Interface, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return watch.NewEmptyWatch(), nil
}

// noStreamingLW is a scriptedLW that says it cannot stream its lists.
type noStreamingLW struct{ scriptedLW }

func (*noStreamingLW) IsWatchListSemanticsUnSupported() bool { return true }

var (
	refused   = fmt.Errorf("dial tcp 127.0.0.1:6443: connect: %w", syscall.ECONNREFUSED)
	forbidden = apierrors.NewForbidden(schema.GroupResource{Group: "core.navique.com", Resource: "locks"}, "", errors.New("RBAC: not yet"))
	notFound  = apierrors.NewNotFound(schema.GroupResource{Group: "core.navique.com", Resource: "locks"}, "x")
	invalid   = apierrors.NewBadRequest("bad field selector")
)

// testSteady wraps lw with retries that record their waits instead of
// sleeping, on a clock that each wait advances.
func testSteady(lw toolscache.ListerWatcher, retryFor time.Duration) (*steadyLW, *[]time.Duration) {
	var waits []time.Duration
	clock := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	s := steadyListWatch(lw, nil).(*steadyLW)
	s.for_ = retryFor
	s.now = func() time.Time { return clock }
	s.sleep = func(ctx context.Context, d time.Duration) bool {
		waits = append(waits, d)
		clock = clock.Add(d)
		return ctx.Err() == nil
	}
	return s, &waits
}

func TestSteadyListWatchRetriesARestart(t *testing.T) {
	ctx := context.Background()
	lw := &scriptedLW{errs: []error{refused, refused, refused, forbidden, apierrors.NewServiceUnavailable("starting")}}
	s, waits := testSteady(lw, time.Minute)
	if _, err := s.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list: %v, want the success after the restart's errors", err)
	}
	if lw.calls != 6 {
		t.Errorf("%d lists, want 6 (5 failures, then the success)", lw.calls)
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second}
	if diff := cmp.Diff(want, *waits); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}

	// A 429's Retry-After is honoured when longer than the next wait.
	lw = &scriptedLW{errs: []error{apierrors.NewTooManyRequests("slow down", 5)}}
	s, waits = testSteady(lw, time.Minute)
	if _, err := s.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list after a 429: %v", err)
	}
	if diff := cmp.Diff([]time.Duration{5 * time.Second}, *waits); diff != "" {
		t.Errorf("waits after a 429 (-want +got):\n%s", diff)
	}

	lw = &scriptedLW{errs: []error{refused, forbidden}}
	s, _ = testSteady(lw, time.Minute)
	w, err := s.WatchWithContext(ctx, metav1.ListOptions{})
	if err != nil || w == nil {
		t.Fatalf("watch: %v, %v; want a watch after the restart's errors", w, err)
	}
	w.Stop()
}

func TestSteadyListWatchReturnsOtherErrorsAtOnce(t *testing.T) {
	for _, err := range []error{notFound, invalid, errors.New("a plain error")} {
		lw := &scriptedLW{errs: []error{err}}
		s, waits := testSteady(lw, time.Minute)
		if _, got := s.ListWithContext(context.Background(), metav1.ListOptions{}); got != err {
			t.Errorf("list: %v, want %v returned as it is", got, err)
		}
		if lw.calls != 1 || len(*waits) != 0 {
			t.Errorf("%v: %d lists, %d waits; want 1 and none", err, lw.calls, len(*waits))
		}
	}
}

func TestSteadyListWatchGivesUp(t *testing.T) {
	// A 403 that lasts (RBAC really missing) reaches the reflector, which
	// logs it, once the retries' time is spent.
	errs := make([]error, 100)
	for i := range errs {
		errs[i] = forbidden
	}
	lw := &scriptedLW{errs: errs}
	s, waits := testSteady(lw, 5*time.Second)
	_, err := s.ListWithContext(context.Background(), metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("list: %v, want the lasting 403", err)
	}
	var waited time.Duration
	for _, w := range *waits {
		waited += w
	}
	// 0.25+0.5+1+2 s, then the next 2 s would pass the 5 s.
	if lw.calls != 5 || waited != 3750*time.Millisecond {
		t.Errorf("%d lists over %s, want 5 over 3.75s", lw.calls, waited)
	}

	// A cancelled context stops the retries at once.
	lw = &scriptedLW{errs: []error{refused, refused}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s, _ = testSteady(lw, time.Minute)
	if _, err := s.ListWithContext(ctx, metav1.ListOptions{}); err != refused {
		t.Errorf("list with a cancelled context: %v, want the first error", err)
	}
	if lw.calls != 1 {
		t.Errorf("%d lists with a cancelled context, want 1", lw.calls)
	}
}

func TestSteadyListWatchKeepsStreamingSemantics(t *testing.T) {
	if watchlist.DoesClientNotSupportWatchListSemantics(steadyListWatch(&scriptedLW{}, nil)) {
		t.Error("a ListerWatcher that streams lists lost it when wrapped")
	}
	if !watchlist.DoesClientNotSupportWatchListSemantics(steadyListWatch(&noStreamingLW{}, nil)) {
		t.Error("a ListerWatcher that cannot stream lists was wrapped into one that says it can")
	}
}
