package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// drain returns the requests in q, in order.
func drain(q workqueue.TypedRateLimitingInterface[request]) []request {
	var out []request
	for q.Len() > 0 {
		r, _ := q.Get()
		q.Done(r)
		out = append(out, r)
	}
	return out
}

func newQueue() workqueue.TypedRateLimitingInterface[request] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[request]())
}

// TestLockEventsStatusOnly: a Lock update that changes its status alone
// (a lastDenied or a status write) enqueues the Lock's own pass; a spec
// change or the start of its deletion enqueues everything it concerns.
func TestLockEventsStatusOnly(t *testing.T) {
	r := &reconciler{namespaceGuard: true}
	old := newLock("forge", "keep", "", "Stack", "web")
	old.Generation = 1
	target := request{Target: lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "web"}}
	for name, tc := range map[string]struct {
		change func(*lockv1alpha1.Lock)
		want   []request
	}{
		"status": {func(l *lockv1alpha1.Lock) {
			l.Status.LastDenied = &lockv1alpha1.DeniedRequest{Count: 1}
		}, []request{target}},
		"spec": {func(l *lockv1alpha1.Lock) {
			l.Generation, l.Spec.Level = 2, lockv1alpha1.LevelReadOnly
		}, []request{target, {Namespace: "forge"}}},
		"deleting": {func(l *lockv1alpha1.Lock) {
			l.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		}, []request{target, {Namespace: "forge"}}},
	} {
		q := newQueue()
		updated := old.DeepCopy()
		tc.change(updated)
		lockEvents{r}.Update(t.Context(), event.TypedUpdateEvent[*lockv1alpha1.Lock]{ObjectOld: old, ObjectNew: updated}, q)
		if diff := cmp.Diff(tc.want, drain(q)); diff != "" {
			t.Errorf("%s: enqueued -want, +got:\n%s", name, diff)
		}
	}
}

// TestObjectEventsOwnPass: an object's events enqueue its own pass at
// once (the selector Locks, found in the Lock index, come a moment later).
func TestObjectEventsOwnPass(t *testing.T) {
	h := objectEvents{gk: schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}}
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "web", Labels: map[string]string{"tier": "db"}}}
	relabelled := o.DeepCopy()
	relabelled.Labels["tier"] = "web"
	q := newQueue()
	h.Create(t.Context(), event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: o}, q)
	h.Update(t.Context(), event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: o, ObjectNew: relabelled}, q)
	h.Delete(t.Context(), event.TypedDeleteEvent[*metav1.PartialObjectMetadata]{Object: o}, q)
	want := []request{{Target: lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "web"}}}
	if diff := cmp.Diff(want, drain(q)); diff != "" {
		t.Errorf("enqueued -want, +got:\n%s", diff)
	}
}
