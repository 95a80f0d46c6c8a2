package webhook

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// targetLocks is a fake Locks that answers LiveLocks with live; the
// embedded NoLocks answers the other lookups (no Lock).
type targetLocks struct {
	NoLocks
	live func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error)
}

// LiveLocks calls live.
func (t targetLocks) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	return t.live(key)
}

// ByTarget returns the fake Locks whose LiveLocks is live.
func ByTarget(live func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error)) Locks {
	return targetLocks{live: live}
}

// withCache is a fake Locks whose lookups by target go to target and
// whose other lookups go to the embedded cache.
type withCache struct {
	Locks  // the cache
	target Locks
}

// LiveLocks asks target.
func (w withCache) LiveLocks(key lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
	return w.target.LiveLocks(key)
}

// readerOf is the reader of cache that confirms through live.
func readerOf(cache Locks, live LockLister) *lockReader {
	return newLockReader(cache, live, nil, nil, nil)
}

// cascadeOf is the cascade guard of h; nil when it has none.
func (h *Handler) cascadeOf() *cascadeGuard {
	for _, g := range h.guards {
		if c, ok := g.(*cascadeGuard); ok {
			return c
		}
	}
	return nil
}

// TestWithoutLocks: a Handler configured without a Lock cache refuses the
// delete of a target (fail closed) rather than allowing it.
func TestWithoutLocks(t *testing.T) {
	req := request(admissionv1.Delete, lockv1alpha1.Group, "Stack", "forge", "forge", "forge")
	got := resultOf(NewHandler(Config{}).Decide(context.Background(), req))
	want := result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
		Message: "lockguard could not verify Locks for Stack.core.navique.com forge/forge, so the delete is refused; retry when lockguard is ready: lockguard is configured without a Lock cache"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Decide(DELETE Stack) without Locks: -want, +got:\n%s", diff)
	}
}
