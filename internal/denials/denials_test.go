package denials

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func newScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

func lock(name string) *lockv1alpha1.Lock {
	l := &lockv1alpha1.Lock{}
	l.Namespace, l.Name, l.UID = "forge", name, types.UID("uid-"+name)
	l.Spec.TargetRef = lockv1alpha1.TargetReference{Kind: "Stack", Name: "web"}
	return l
}

func denial(user string, at time.Time) lockv1alpha1.DeniedRequest {
	return lockv1alpha1.DeniedRequest{Time: metav1.NewTime(at), User: user, Operation: "DELETE", Kind: "Stack", Name: "web"}
}

// lastDenied reads the Lock's status.lastDenied.
func lastDenied(t *testing.T, c client.Client, name string) *lockv1alpha1.DeniedRequest {
	t.Helper()
	var l lockv1alpha1.Lock
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "forge", Name: name}, &l); err != nil {
		t.Fatal(err)
	}
	return l.Status.LastDenied
}

// TestBurstIsOneWritePerInterval: refusals recorded between two flushes
// are written together, adding to the Lock's count, and the first of a
// quiet Lock is written at once.
func TestBurstIsOneWritePerInterval(t *testing.T) {
	l := lock("keep")
	var patches atomic.Int32
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(l).WithStatusSubresource(l).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
			patches.Add(1)
			return c.SubResource(sub).Patch(ctx, obj, p, o...)
		}}).Build()
	r := New(c, c, Options{Interval: time.Hour})
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	r.now = func() time.Time { return now }

	r.RecordDenial([]lockv1alpha1.Lock{*l}, denial("alice", now))
	r.flush(context.Background())
	if diff := cmp.Diff(&lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now), User: "alice", Operation: "DELETE", Kind: "Stack", Name: "web", Count: 1}, lastDenied(t, c, "keep")); diff != "" {
		t.Errorf("after the first refusal: -want, +got:\n%s", diff)
	}
	for i := range 49 {
		r.RecordDenial([]lockv1alpha1.Lock{*l}, denial("bob", now.Add(time.Duration(i)*time.Second)))
		if next := r.flush(context.Background()); next <= 0 {
			t.Fatalf("flush after refusal %d: next in %s, want the rest of the interval", i, next)
		}
	}
	if n := patches.Load(); n != 1 {
		t.Errorf("%d status writes within the interval, want 1", n)
	}
	now = now.Add(time.Hour)
	r.flush(context.Background())
	got := lastDenied(t, c, "keep")
	if got.Count != 50 || got.User != "bob" {
		t.Errorf("after 50 refusals: count %d by %q, want 50, the last by bob", got.Count, got.User)
	}
	if n := patches.Load(); n != 2 {
		t.Errorf("%d status writes in two intervals, want 2", n)
	}
	if pending, entries := r.Pending(); pending != 0 || entries != 1 {
		t.Errorf("Pending() = %d, %d; want none pending, one entry (written within the interval)", pending, entries)
	}
	now = now.Add(time.Hour)
	r.flush(context.Background())
	if _, entries := r.Pending(); entries != 0 {
		t.Errorf("%d entries an interval after the last write, want 0", entries)
	}
}

// TestConflictAddsToTheOtherWritersCount: a write that conflicts reads the
// Lock again from the API server and adds to the count another replica
// wrote there meanwhile, keeping the later request.
func TestConflictAddsToTheOtherWritersCount(t *testing.T) {
	l := lock("keep")
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	var conflicted atomic.Bool
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(l).WithStatusSubresource(l).
		WithInterceptorFuncs(interceptor.Funcs{SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, o ...client.SubResourcePatchOption) error {
			if conflicted.CompareAndSwap(false, true) {
				// Another replica writes first: 7 refusals, the last later.
				other := &lockv1alpha1.Lock{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil {
					return err
				}
				d := denial("carol", now.Add(time.Minute))
				d.Count = 7
				other.Status.LastDenied = &d
				if err := c.Status().Update(ctx, other); err != nil {
					return err
				}
				return apierrors.NewConflict(schema.GroupResource{Group: lockv1alpha1.Group, Resource: "locks"}, obj.GetName(), nil)
			}
			return c.SubResource(sub).Patch(ctx, obj, p, o...)
		}}).Build()
	m := NewMetrics()
	r := New(c, c, Options{Metrics: m})
	r.now = func() time.Time { return now }
	r.RecordDenial([]lockv1alpha1.Lock{*l}, denial("alice", now))
	r.RecordDenial([]lockv1alpha1.Lock{*l}, denial("alice", now))
	r.flush(context.Background())
	got := lastDenied(t, c, "keep")
	if got.Count != 9 || got.User != "carol" {
		t.Errorf("after a conflict: count %d, last by %q; want 9 (7 + 2), the later by carol", got.Count, got.User)
	}
}

// TestGoneLockIsDropped: the entry of a Lock deleted, or recreated under
// the same name, is dropped at its write, and nothing is written.
func TestGoneLockIsDropped(t *testing.T) {
	recreated := lock("recreated")
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(recreated).WithStatusSubresource(recreated).Build()
	r := New(c, c, Options{})
	old := *recreated
	old.UID = "an-older-one"
	r.RecordDenial([]lockv1alpha1.Lock{*lock("deleted"), old}, denial("alice", time.Now()))
	r.flush(context.Background())
	if pending, entries := r.Pending(); pending != 0 || entries != 0 {
		t.Errorf("Pending() = %d, %d; want no entries", pending, entries)
	}
	if got := lastDenied(t, c, "recreated"); got != nil {
		t.Errorf("the recreated Lock got %+v, want nothing", got)
	}
}

// TestBounded: what the CRD would refuse is cut to its lengths.
func TestBounded(t *testing.T) {
	long := string(make([]byte, 600))
	d := bounded(lockv1alpha1.DeniedRequest{User: long, Operation: long, Kind: long, Name: long})
	if len(d.User) != 512 || len(d.Operation) != 16 || len(d.Kind) != 63 || len(d.Name) != 253 {
		t.Errorf("bounded lengths: user %d, operation %d, kind %d, name %d", len(d.User), len(d.Operation), len(d.Kind), len(d.Name))
	}
}

// TestClusterLockDenials: a ClusterLock's refusals are written to the
// ClusterLock's status.lastDenied through the same entries, apart from a
// Lock of the same name; lastWouldDeny alike; a ClusterLock gone, or
// recreated, is dropped.
func TestClusterLockDenials(t *testing.T) {
	l := lock("keep")
	cl := &lockv1alpha1.ClusterLock{}
	cl.Name, cl.UID = "keep", "uid-cluster-keep"
	cl.Spec.TargetRef = lockv1alpha1.ClusterTargetReference{APIVersion: "v1", Kind: "Namespace", Name: "prod"}
	c := fake.NewClientBuilder().WithScheme(newScheme(t)).WithObjects(l, cl).WithStatusSubresource(l, cl).Build()
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	nsDelete := lockv1alpha1.DeniedRequest{Time: metav1.NewTime(now), User: "alice", Operation: "DELETE", Kind: "Namespace", Name: "prod"}
	readCluster := func(name string) lockv1alpha1.LockStatus {
		t.Helper()
		var got lockv1alpha1.ClusterLock
		if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &got); err != nil {
			t.Fatal(err)
		}
		return got.Status
	}

	r := New(c, c, Options{})
	r.now = func() time.Time { return now }
	r.RecordClusterDenial([]lockv1alpha1.ClusterLock{*cl}, nsDelete)
	r.RecordClusterDenial([]lockv1alpha1.ClusterLock{*cl}, nsDelete)
	r.RecordDenial([]lockv1alpha1.Lock{*l}, denial("bob", now))
	if pending, entries := r.Pending(); pending != 2 || entries != 2 {
		t.Errorf("Pending() = %d, %d; want the Lock and the ClusterLock of the same name apart", pending, entries)
	}
	r.flush(context.Background())
	want := nsDelete
	want.Count = 2
	if diff := cmp.Diff(&want, readCluster("keep").LastDenied); diff != "" {
		t.Errorf("the ClusterLock's lastDenied: -want, +got:\n%s", diff)
	}
	if got := lastDenied(t, c, "keep"); got == nil || got.User != "bob" || got.Count != 1 {
		t.Errorf("the Lock's lastDenied %+v, want bob's one refusal", got)
	}

	would := New(c, c, Options{WouldDeny: true})
	would.RecordClusterDenial([]lockv1alpha1.ClusterLock{*cl}, nsDelete)
	would.flush(context.Background())
	if got := readCluster("keep"); got.LastWouldDeny == nil || got.LastWouldDeny.Count != 1 || got.LastDenied.Count != 2 {
		t.Errorf("after a would-deny: lastWouldDeny %+v, lastDenied %+v; want one would-deny, the 2 refusals kept", got.LastWouldDeny, got.LastDenied)
	}

	recreated := *cl
	recreated.UID = "an-older-one"
	gone := lockv1alpha1.ClusterLock{}
	gone.Name, gone.UID = "deleted", "uid-deleted"
	r.RecordClusterDenial([]lockv1alpha1.ClusterLock{recreated, gone}, nsDelete)
	now = now.Add(time.Hour)
	r.flush(context.Background())
	if got := readCluster("keep").LastDenied; got.Count != 2 {
		t.Errorf("the ClusterLock's count after a refusal by another of its name: %d, want 2", got.Count)
	}
	if pending, _ := r.Pending(); pending != 0 {
		t.Errorf("%d entries pending after the gone ClusterLocks' flush, want 0", pending)
	}
}
