package controller

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestSoonest: a pass comes back when the first Lock it read expires, or
// after its own recheck when that is sooner; Locks without expiry, or
// expired already, change nothing.
func TestSoonest(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	expiring := func(d time.Duration) lockv1alpha1.Lock {
		l := *newLock("forge", "l", "", "Stack", "web")
		l.Spec.ExpiresAt = &metav1.Time{Time: now.Add(d)}
		return l
	}
	forever := *newLock("forge", "f", "", "Stack", "web")
	got := []time.Duration{
		soonest(0, now),
		soonest(0, now, []lockv1alpha1.Lock{forever}),
		soonest(0, now, []lockv1alpha1.Lock{forever, expiring(time.Hour)}, []lockv1alpha1.Lock{expiring(time.Minute)}),
		soonest(10*time.Second, now, []lockv1alpha1.Lock{expiring(time.Minute)}),
		soonest(10*time.Second, now, []lockv1alpha1.Lock{expiring(time.Second)}),
		soonest(0, now, []lockv1alpha1.Lock{expiring(0), expiring(-time.Hour)}),
	}
	want := []time.Duration{0, 0, time.Minute, 10 * time.Second, time.Second, 0}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("soonest(...): -want, +got:\n%s", diff)
	}
}

// TestReconcileExpiredLock: the pass of an expired Lock writes its status
// Expired (not active, Ready False, the message with the time, a
// ReadOnly Lock's freeze Pending) once; the next pass writes nothing: a
// steady cluster gets no writes.
func TestReconcileExpiredLock(t *testing.T) {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	expiry := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	lock := newLock("forge", "all", "", "", "")
	lock.Spec.TargetRef, lock.Spec.Selector = lockv1alpha1.TargetReference{}, &lockv1alpha1.LockSelector{}
	lock.Spec.Level = lockv1alpha1.LevelReadOnly
	lock.Spec.ExpiresAt = &metav1.Time{Time: expiry}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(lock).WithStatusSubresource(lock).Build()
	r := &reconciler{client: c, now: func() time.Time { return expiry }, readOnlyGuard: true}
	key := client.ObjectKeyFromObject(lock)

	if res, err := r.reconcileLock(context.Background(), key); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reconcileLock: %+v, %v; want no requeue", res, err)
	}
	var got lockv1alpha1.Lock
	if err := c.Get(context.Background(), key, &got); err != nil {
		t.Fatal(err)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReady)
	readOnly := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReadOnly)
	if ready == nil || readOnly == nil {
		t.Fatalf("conditions %+v, want Ready and ReadOnly", got.Status.Conditions)
	}
	type status struct {
		Active                           bool
		Ready, Reason, Message, ReadOnly string
	}
	want := status{Ready: "False", Reason: lockv1alpha1.ReasonExpired, Message: "this Lock expired at 2026-12-03T17:00:00Z and protects nothing any more; it is kept as a record until it is deleted", ReadOnly: lockv1alpha1.ReasonPending}
	if diff := cmp.Diff(want, status{got.Status.Active, string(ready.Status), ready.Reason, ready.Message, readOnly.Reason}); diff != "" {
		t.Errorf("status of the expired Lock: -want, +got:\n%s", diff)
	}

	if _, err := r.reconcileLock(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	var again lockv1alpha1.Lock
	if err := c.Get(context.Background(), key, &again); err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != got.ResourceVersion {
		t.Errorf("the second pass wrote the expired Lock again: resourceVersion %s, then %s", got.ResourceVersion, again.ResourceVersion)
	}
}

// TestReconcileInvalidLockExpires: a Lock whose scope is invalid says
// InvalidTarget and comes back at its expiry, when it says Expired
// (the chaos run of 2026-12-04 12:42 UTC found one still InvalidTarget a
// minute after its expiry: the pass returned without a requeue).
func TestReconcileInvalidLockExpires(t *testing.T) {
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	expiry := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	lock := newLock("forge", "odd", "apps/v1", "Stack", "forge")
	lock.Spec.ExpiresAt = &metav1.Time{Time: expiry}
	if lock.Scope() == nil {
		t.Fatal("the Lock's scope is valid; want an invalid one")
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(lock).WithStatusSubresource(lock).Build()
	now := expiry.Add(-time.Minute)
	r := &reconciler{client: c, now: func() time.Time { return now }}
	key := client.ObjectKeyFromObject(lock)
	reason := func() string {
		var got lockv1alpha1.Lock
		if err := c.Get(context.Background(), key, &got); err != nil {
			t.Fatal(err)
		}
		if cond := meta.FindStatusCondition(got.Status.Conditions, lockv1alpha1.ConditionReady); cond != nil {
			return cond.Reason
		}
		return ""
	}
	if res, err := r.reconcileLock(context.Background(), key); err != nil || res.RequeueAfter != time.Minute {
		t.Fatalf("reconcileLock a minute before its expiry: %+v, %v; want a requeue after 1m", res, err)
	}
	if got := reason(); got != lockv1alpha1.ReasonInvalidTarget {
		t.Fatalf("reason %q; want %s", got, lockv1alpha1.ReasonInvalidTarget)
	}
	now = expiry
	if res, err := r.reconcileLock(context.Background(), key); err != nil || res.RequeueAfter != 0 {
		t.Fatalf("reconcileLock at its expiry: %+v, %v; want no requeue", res, err)
	}
	if got := reason(); got != lockv1alpha1.ReasonExpired {
		t.Fatalf("reason %q at its expiry; want %s", got, lockv1alpha1.ReasonExpired)
	}
}
