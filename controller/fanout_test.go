package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

// drain returns the requests in q, in order.
func drain(q workqueue.TypedRateLimitingInterface[item]) []request {
	var out []request
	for q.Len() > 0 {
		r, _ := q.Get()
		q.Done(r)
		out = append(out, r.Value())
	}
	return out
}

func newQueue() workqueue.TypedRateLimitingInterface[item] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[item]())
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

// TestObjectEventsIdle: an object's create enqueues its own pass unless
// the pass would write nothing (objectEvents.idle): no mark of
// lockguard's on it, no Lock of the index naming it (live or expired) or
// covering it, and its kind seen by the Lock events. The informer's own
// object (a readmodel.Meta, as the cache's transform stores the event's)
// is dropped before it is converted exactly when Create drops the event
// (dropsAdd: the same decision, read in place).
func TestObjectEventsIdle(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	named := *newLock("forge", "named", "core.navique.com/v1alpha1", "Stack", "web")
	expired := *newLock("forge", "expired", "core.navique.com/v1alpha1", "Stack", "web")
	expired.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Minute)}
	selecting := func(tier string) lockv1alpha1.Lock {
		l := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "tier-" + tier, UID: types.UID("uid-tier-" + tier)},
			Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": tier}}}}
		return l
	}
	web := lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "web"}
	own := []request{{Target: web}}
	for name, tc := range map[string]struct {
		locks       []lockv1alpha1.Lock
		labels      map[string]string
		annotations map[string]string
		unseen      bool
		want        []request
	}{
		"NothingToDo":       {locks: []lockv1alpha1.Lock{selecting("db")}, labels: map[string]string{"tier": "web"}},
		"Annotated":         {annotations: map[string]string{lockv1alpha1.LockedAnnotation: "gone"}, want: own},
		"PendingMark":       {annotations: map[string]string{lockv1alpha1.ProtectedPendingAnnotation: "2026-12-04T12:00:00Z x"}, want: own},
		"ReadOnlyLabel":     {labels: map[string]string{lockv1alpha1.ReadOnlyLabel: "true"}, want: own},
		"ProtectedLabel":    {labels: map[string]string{lockv1alpha1.ProtectedLabel: "true"}, want: own},
		"NamedByLock":       {locks: []lockv1alpha1.Lock{named}, want: own},
		"NamedByExpired":    {locks: []lockv1alpha1.Lock{expired}, want: own},
		"SelectedByLock":    {locks: []lockv1alpha1.Lock{selecting("web")}, labels: map[string]string{"tier": "web"}, want: own},
		"KindNotSeenYet":    {unseen: true, want: own},
		"OtherNamespace":    {locks: []lockv1alpha1.Lock{*newLock("other", "named", "core.navique.com/v1alpha1", "Stack", "web")}},
		"OtherKindLabelled": {labels: map[string]string{"tier": "web"}, locks: []lockv1alpha1.Lock{*newLock("forge", "w", "core.navique.com/v1alpha1", "Widget", "web")}},
	} {
		t.Run(name, func(t *testing.T) {
			for i := range tc.locks {
				tc.locks[i].Generation = 1
			}
			h := objectEvents{gk: schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}, locks: readmodeltest.Index(t, clock, tc.locks...),
				seen: func() bool { return !tc.unseen }}
			o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "web", Labels: tc.labels, Annotations: tc.annotations}}
			stored, err := readmodel.CacheTransform(nil, nil)(o.DeepCopy())
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := stored.(*readmodel.Meta); !ok {
				t.Fatalf("the cache stores a %T, not a Meta", stored)
			}
			q := newQueue()
			h.Create(t.Context(), event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: o}, q)
			if diff := cmp.Diff(tc.want, drain(q)); diff != "" {
				t.Errorf("enqueued -want, +got:\n%s", diff)
			}
			if got, want := h.dropsAdd(stored), tc.want == nil; got != want {
				t.Errorf("dropsAdd of the stored object = %t, Create dropped the event: %t", got, want)
			}
		})
	}
}

// TestObjectEventsInitialSelectorLocks: the objects of the initial list
// enqueue the selector Locks that cover them through the paced backlog,
// each Lock's pass once however many of its objects come (a later
// object's enqueues it after protectedRecount instead).
func TestObjectEventsInitialSelectorLocks(t *testing.T) {
	now := time.Now()
	tier := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "tier", UID: "uid-tier", Generation: 1},
		Spec: lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "web"}}}}
	h := objectEvents{gk: schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}, locks: readmodeltest.Index(t, func() time.Time { return now }, tier)}
	q := newTestPacedQueue(t, 1)
	defer q.ShutDown()
	var want []request
	for _, name := range []string{"a", "b", "c"} {
		o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name, Labels: map[string]string{"tier": "web"}}}
		h.Create(t.Context(), event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: o, IsInInitialList: true}, q)
		want = append(want, request{Target: lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: name}})
		if name == "a" {
			want = append(want, request{Lock: types.NamespacedName{Namespace: "forge", Name: "tier"}})
		}
	}
	if diff := cmp.Diff(want, drain(q)); diff != "" {
		t.Errorf("enqueued -want, +got:\n%s", diff)
	}
}
