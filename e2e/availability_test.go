//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/cmd/lockguard/manager"
	"github.com/navique/lockguard/e2e/framework"
)

// failoverBound bounds how long the leader Lease takes to move after the
// leader is killed: the Lease duration (15s) plus a jittered retry period
// (2s to 4.4s), with room for a loaded machine.
const failoverBound = 60 * time.Second

// replicaCount returns how many lockguard replicas run now, and makes the
// test restore that many at its end.
func replicaCount(t *testing.T) int {
	t.Helper()
	rs, err := s.lg.Replicas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	n := max(len(rs), 1)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := s.lg.Scale(ctx, n); err != nil {
			t.Errorf("restoring %d lockguard replicas: %v", n, err)
		}
	})
	return n
}

// scale runs n lockguard replicas, ready.
func scale(t *testing.T, n int) time.Duration {
	t.Helper()
	start := time.Now()
	if err := s.lg.Scale(t.Context(), n); err != nil {
		t.Fatalf("scaling lockguard to %d: %v", n, err)
	}
	return time.Since(start)
}

// wantFailClosed fails the test unless err is the API server's error for a
// webhook that cannot be called (failurePolicy Fail).
func wantFailClosed(t *testing.T, err error) {
	t.Helper()
	prefix := fmt.Sprintf("Internal error occurred: failed calling webhook %q: failed to call webhook: ", kube.WebhookName)
	if err == nil {
		t.Fatalf("the delete succeeded while lockguard is down; want %q...", prefix)
	}
	t.Logf("fail closed: %v", err)
	if !apierrors.IsInternalError(err) || !strings.HasPrefix(err.Error(), prefix) {
		t.Fatalf("got error %q (reason %s), want an InternalError starting with %q", err, apierrors.ReasonForError(err), prefix)
	}
}

// Test10LockguardDown stops every lockguard replica. Deletes of
// core.navique.com objects then fail closed with the API server's "failed
// calling webhook" error, locked or not; deletes of other resources, of
// cluster-scoped core.navique.com objects and of Locks still work, Lock
// creates fail closed (every replica must hear of a Lock first). Once
// lockguard runs again, protection resumes and the annotation of a Lock
// deleted in the meantime is removed.
func Test10LockguardDown(t *testing.T) {
	ns := kube.NewNamespace(t, "down")
	n := replicaCount(t)
	kube.CreateObject(t, framework.StackGVK, ns, "kept")
	kube.CreateObject(t, framework.StackGVK, ns, "released")
	kube.CreateObject(t, framework.StackGVK, ns, "free")
	kept := kube.CreateLock(t, framework.NewLock(ns, "keep-kept", "Stack", "kept", "still locked"))
	released := kube.CreateLock(t, framework.NewLock(ns, "keep-released", "Stack", "released", "deleted while lockguard is down"))
	kube.WaitActive(t, kept, released)

	d := scale(t, 0)
	t.Logf("lockguard stopped in %s", d.Round(time.Millisecond))

	wantFailClosed(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "free"))
	wantFailClosed(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "kept"))
	wantFailClosed(t, kube.Client.DeleteAllOf(t.Context(), framework.Object(framework.StackGVK, ns, ""), client.InNamespace(ns)))
	for _, name := range []string{"free", "kept", "released"} {
		kube.MustExist(t, framework.StackGVK, ns, name)
	}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"}}
	if err := kube.Client.Create(t.Context(), cm); err != nil {
		t.Fatal(err)
	}
	if err := kube.Client.Delete(t.Context(), cm); err != nil {
		t.Fatalf("deleting a ConfigMap while lockguard is down: %v", err)
	}
	region := framework.Object(framework.RegionGVK, "", "e2e-down-"+rand.String(5))
	if err := kube.Client.Create(t.Context(), region); err != nil {
		t.Fatal(err)
	}
	if err := kube.Client.Delete(t.Context(), region); err != nil {
		t.Fatalf("deleting a cluster-scoped Region while lockguard is down: %v", err)
	}
	// Locks: creates need lockguard (every replica must hear of a Lock
	// before it exists, internal/peers), updates and deletes do not.
	err := kube.Client.Create(t.Context(), framework.NewLock(ns, "spare", "Stack", "free", ""))
	createPrefix := `Internal error occurred: failed calling webhook "create.lockguard.core.navique.com": failed to call webhook: `
	if err == nil || !apierrors.IsInternalError(err) || !strings.HasPrefix(err.Error(), createPrefix) {
		t.Fatalf("creating a Lock while lockguard is down: %v; want an InternalError starting with %q", err, createPrefix)
	}
	edited := released.DeepCopy()
	edited.Spec.Reason = "edited while lockguard is down"
	if err := kube.Client.Patch(t.Context(), edited, client.MergeFrom(released)); err != nil {
		t.Fatalf("updating a Lock while lockguard is down: %v", err)
	}
	if r := kube.Kubectl(t, "", "delete", "lock", "keep-released", "-n", ns); r.Code != 0 {
		t.Fatalf("kubectl delete lock while lockguard is down: exit %d: %s", r.Code, r.Stderr)
	}
	if err := kube.AnnotationIs(framework.StackGVK, ns, "released", "keep-released")(t.Context()); err != nil {
		t.Fatalf("nothing should touch annotations while lockguard is down: %v", err)
	}

	start := time.Now()
	d = scale(t, n)
	t.Logf("lockguard ready again in %s", d.Round(time.Millisecond))
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "kept"), kept)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "released", "")
	report(t, "stale annotation removed %s after lockguard was started again", time.Since(start).Round(10*time.Millisecond))
	kube.WaitActive(t, kept)
	for _, name := range []string{"released", "free"} {
		if err := kube.DeleteObject(t.Context(), framework.StackGVK, ns, name); err != nil {
			t.Fatalf("deleting unlocked Stack %s after lockguard is back: %v", name, err)
		}
	}
}

// fakeHolder holds lockguard's leader Lease in Test11 so that no replica
// reconciles.
const fakeHolder = "e2e-fake-leader"

// holdLease makes fakeHolder the holder of lockguard's Lease for an hour.
// Call it while no replica runs. The Lease is deleted at the end of the
// test, if still held.
func holdLease(t *testing.T) {
	t.Helper()
	key := client.ObjectKey{Namespace: s.namespace, Name: manager.LeaderElectionID}
	now := metav1.NewMicroTime(time.Now())
	spec := coordinationv1.LeaseSpec{HolderIdentity: ptr.To(fakeHolder), LeaseDurationSeconds: ptr.To[int32](3600), AcquireTime: &now, RenewTime: &now}
	var lease coordinationv1.Lease
	err := kube.Client.Get(t.Context(), key, &lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}, Spec: spec}
		err = kube.Client.Create(t.Context(), &lease)
	case err == nil:
		lease.Spec = spec
		err = kube.Client.Update(t.Context(), &lease)
	}
	if err != nil {
		t.Fatalf("taking lockguard's Lease: %v", err)
	}
	t.Cleanup(func() { _ = releaseLease(context.Background()) })
}

// releaseLease deletes lockguard's Lease if fakeHolder holds it.
func releaseLease(ctx context.Context) error {
	var lease coordinationv1.Lease
	if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: manager.LeaderElectionID}, &lease); err != nil {
		return client.IgnoreNotFound(err)
	}
	if ptr.Deref(lease.Spec.HolderIdentity, "") != fakeHolder {
		return nil
	}
	return client.IgnoreNotFound(kube.Client.Delete(ctx, &lease))
}

// leaseHolder returns the holder of lockguard's Lease.
func leaseHolder(ctx context.Context) (string, error) {
	var lease coordinationv1.Lease
	if err := kube.Client.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: manager.LeaderElectionID}, &lease); err != nil {
		return "", err
	}
	return ptr.Deref(lease.Spec.HolderIdentity, ""), nil
}

// Test11AnnotationWithoutReconciler removes the lock annotation by hand
// while no replica reconciles (the leader Lease is held by someone else,
// the replicas ready): the Stack stays protected, because the webhook reads
// Locks, and nothing puts the annotation back until a replica leads again.
// (The contract suite's TestAnnotationByHand covers the annotation put
// back while lockguard runs.)
func Test11AnnotationWithoutReconciler(t *testing.T) {
	ns := kube.NewNamespace(t, "byhand")
	n := replicaCount(t)
	kube.CreateObject(t, framework.StackGVK, ns, "guarded")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-guarded", "Stack", "guarded", ""))
	kube.WaitActive(t, lock)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "guarded", "keep-guarded")

	t.Run("removed with no reconciler", func(t *testing.T) {
		scale(t, 0)
		holdLease(t)
		scale(t, n) // Ready: caches synced and webhook serving, but not leading.
		kube.RemoveAnnotation(t, framework.StackGVK, ns, "guarded")
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "guarded"), lock)
		kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "guarded", client.DryRunAll), lock)
		// Nothing put the annotation back: the denials came from the Lock.
		if err := kube.AnnotationIs(framework.StackGVK, ns, "guarded", "")(t.Context()); err != nil {
			t.Fatalf("with no leader, nothing should have put the annotation back: %v", err)
		}
		if err := releaseLease(t.Context()); err != nil {
			t.Fatal(err)
		}
		d := framework.Eventually(t, framework.DefaultTimeout, "annotation put back by the new leader", kube.AnnotationIs(framework.StackGVK, ns, "guarded", "keep-guarded"))
		report(t, "a replica took the released Lease and put the annotation back in %s", d.Round(10*time.Millisecond))
	})
	kube.WaitActive(t, lock)
	kube.MustExist(t, framework.StackGVK, ns, "guarded")
}

// deleteReview is the AdmissionReview the API server sends for a DELETE of
// obj. An empty name is the shape of a deletecollection request: the name
// is only in oldObject.
func deleteReview(t *testing.T, obj *unstructured.Unstructured, name string) *admissionv1.AdmissionReview {
	t.Helper()
	raw, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	gvk := obj.GroupVersionKind()
	kind := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	resource := metav1.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: strings.ToLower(gvk.Kind) + "s"}
	opts, _ := json.Marshal(metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{APIVersion: "meta.k8s.io/v1", Kind: "DeleteOptions"}})
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         types.UID("e2e-" + rand.String(8)),
			Kind:        kind,
			Resource:    resource,
			RequestKind: &kind, RequestResource: &resource,
			Name:      name,
			Namespace: obj.GetNamespace(),
			Operation: admissionv1.Delete,
			UserInfo:  authenticationv1.UserInfo{Username: "e2e"},
			OldObject: runtime.RawExtension{Raw: raw},
			Options:   runtime.RawExtension{Raw: opts},
			DryRun:    ptr.To(false),
		},
	}
}

// wantReview fails the test unless the replica answers the review as
// wanted: denied by locks, or allowed when there are none.
func wantReview(t *testing.T, r replica, review *admissionv1.AdmissionReview, locks ...*lockv1alpha1.Lock) {
	t.Helper()
	got, err := r.Review(t.Context(), review)
	if err != nil {
		t.Fatalf("AdmissionReview to %s: %v", r.Name(), err)
	}
	resp := got.Response
	switch {
	case resp == nil:
		t.Fatalf("%s answered no response", r.Name())
	case resp.UID != review.Request.UID:
		t.Errorf("%s answered UID %s, want %s", r.Name(), resp.UID, review.Request.UID)
	case len(locks) == 0 && !resp.Allowed:
		t.Errorf("%s denied the delete of unlocked %s: %+v", r.Name(), review.Request.Name, resp.Result)
	case len(locks) > 0 && (resp.Allowed || resp.Result == nil || resp.Result.Code != 403 || resp.Result.Message != framework.DenialMessage(locks...)):
		t.Errorf("%s answered allowed=%t %+v; want denied with code 403 and message %q", r.Name(), resp.Allowed, resp.Result, framework.DenialMessage(locks...))
	}
}

// Test12LeaderElection runs two replicas: both serve the webhook (each is
// sent AdmissionReviews directly, over TLS), one leads. Killing the leader
// moves the Lease to the other replica, which carries on reconciling.
func Test12LeaderElection(t *testing.T) {
	ns := kube.NewNamespace(t, "ha")
	replicaCount(t)
	kube.CreateObject(t, framework.StackGVK, ns, "ha")
	free := kube.CreateObject(t, framework.StackGVK, ns, "free")
	lock := kube.CreateLock(t, framework.NewLock(ns, "keep-ha", "Stack", "ha", "two replicas"))
	kube.WaitActive(t, lock)
	ha := kube.MustExist(t, framework.StackGVK, ns, "ha")
	free = kube.MustExist(t, framework.StackGVK, ns, free.GetName())

	scale(t, 2)
	replicas, err := s.lg.Replicas(t.Context())
	if err != nil || len(replicas) != 2 {
		t.Fatalf("replicas: %d, %v; want 2", len(replicas), err)
	}
	var leader, follower replica
	framework.Eventually(t, framework.DefaultTimeout, "exactly one leader", func(ctx context.Context) error {
		leader, follower = nil, nil
		for _, r := range replicas {
			ok, err := r.IsLeader(ctx)
			if err != nil {
				return err
			}
			if ok && leader != nil {
				return fmt.Errorf("both %s and %s lead", leader.Name(), r.Name())
			}
			if ok {
				leader = r
			} else {
				follower = r
			}
		}
		if leader == nil {
			return fmt.Errorf("no replica leads")
		}
		return nil
	})
	t.Logf("leader %s, follower %s", leader.Name(), follower.Name())

	for _, r := range replicas {
		wantReview(t, r, deleteReview(t, ha, "ha"), lock)
		wantReview(t, r, deleteReview(t, ha, ""), lock) // deletecollection shape
		wantReview(t, r, deleteReview(t, free, "free"))
	}
	// Each replica records the refusals it decided in the Lock's
	// status.lastDenied, the leader and the other alike, adding to the
	// count the other wrote.
	framework.Eventually(t, framework.DefaultTimeout, "both replicas' refusals counted in lastDenied", func(ctx context.Context) error {
		var got lockv1alpha1.Lock
		if err := s.c.Get(ctx, client.ObjectKeyFromObject(lock), &got); err != nil {
			return err
		}
		d := got.Status.LastDenied
		if d == nil || d.Count != int64(2*len(replicas)) || d.User != "e2e" || d.Operation != "DELETE" || d.Kind != "Stack" || d.Name != "ha" {
			return fmt.Errorf("lastDenied %+v, want %d refusals of the DELETE of Stack ha by e2e", d, 2*len(replicas))
		}
		return nil
	})

	before, err := leaseHolder(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := leader.Kill(t.Context()); err != nil {
		t.Fatal(err)
	}
	var holder string
	d := framework.Eventually(t, failoverBound, "the Lease moves to a live replica", func(ctx context.Context) error {
		h, err := leaseHolder(ctx)
		if err != nil {
			return err
		}
		if h == before || h == "" {
			return fmt.Errorf("the Lease is still held by %q", h)
		}
		rs, err := s.lg.Replicas(ctx)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if ok, err := r.IsLeader(ctx); err == nil && ok {
				holder = r.Name()
				return nil
			}
		}
		return fmt.Errorf("Lease holder %q is no running replica", h)
	})
	report(t, "leader killed: %s took the Lease after %s (killing took %s)", holder, d.Round(100*time.Millisecond), (time.Since(start) - d).Round(time.Millisecond))

	// The new leader reconciles: a new Lock becomes active.
	late := kube.CreateLock(t, framework.NewLock(ns, "keep-free", "Stack", "free", "created after the failover"))
	kube.WaitActive(t, late)
	kube.WaitAnnotation(t, framework.StackGVK, ns, "free", "keep-free")
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "ha"), lock)
	kube.WantDenied(t, kube.DeleteObject(t.Context(), framework.StackGVK, ns, "free"), late)
	rs, err := s.lg.Replicas(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		wantReview(t, r, deleteReview(t, free, "free"), late)
	}
}
