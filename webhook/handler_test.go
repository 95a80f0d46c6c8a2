package webhook

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func lock(name, reason string) lockv1alpha1.Lock {
	return lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.LockSpec{Reason: reason}}
}

// indexOf returns Locks for exactly one target and fails the test on any
// other lookup, so that each case also checks what the handler asked for.
func indexOf(t *testing.T, key lockv1alpha1.TargetKey, locks ...lockv1alpha1.Lock) Locks {
	return ByTarget(func(got lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		if got != key {
			t.Errorf("LiveLocks(%s), want LiveLocks(%s)", got, key)
		}
		return locks, nil
	})
}

func noLookup(t *testing.T) Locks {
	return ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
		t.Error("LiveLocks called, want no lookup")
		return nil, nil
	})
}

// request is the Request of op on a group/kind object ns/name; oldObject
// names the object when name is empty.
func request(op admissionv1.Operation, group, kind, ns, name, oldName string) Request {
	r := Request{
		Operation: op,
		Kind:      metav1.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind},
		Namespace: ns,
		Name:      name,
	}
	r.OldObject.Metadata.Name = oldName
	return r
}

// result is the part of a response the tests compare.
type result struct {
	Allowed bool
	Code    int32
	Reason  metav1.StatusReason
	Message string
}

func resultOf(r admission.Response) result {
	res := result{Allowed: r.Allowed}
	if r.Result != nil {
		res.Code, res.Reason, res.Message = r.Result.Code, r.Result.Reason, r.Result.Message
	}
	return res
}

var forgeStack = lockv1alpha1.TargetKey{Namespace: "forge", Group: "core.navique.com", Kind: "Stack", Name: "forge"}

func TestDecide(t *testing.T) {
	const protected = "resource is protected by Lock(s) "
	const tail = "; delete the Lock(s) before deleting this resource"

	cases := map[string]struct {
		reason string
		index  Locks
		req    Request
		want   result
	}{
		"SeedExample": {
			reason: "A Stack targeted by one Lock cannot be deleted; the message is the contract's, then the reason.",
			index:  indexOf(t, forgeStack, lock("protect-forge-stack", "Production")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[protect-forge-stack]" + tail + " (protect-forge-stack: Production)"},
		},
		"SortedNamesAllReasons": {
			reason: "Every matching Lock is named, sorted; reasons follow in the same order, Locks without a reason are skipped.",
			index:  indexOf(t, forgeStack, lock("zeta", "z"), lock("alpha", ""), lock("mid", "m")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[alpha mid zeta]" + tail + " (mid: m; zeta: z)"},
		},
		"NotLocked": {
			reason: "Without a Lock the delete is allowed.",
			index:  indexOf(t, forgeStack),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Allowed: true, Code: 200},
		},
		"DeleteCollectionNameFromOldObject": {
			reason: "A deletecollection names the object only in oldObject.",
			index:  indexOf(t, forgeStack, lock("l", "")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "", "forge"),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[l]" + tail},
		},
		"RequestNameWins": {
			reason: "The request's name is the object deleted; oldObject's is not read then.",
			index:  indexOf(t, forgeStack, lock("l", "")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", "free"),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[l]" + tail},
		},
		"NoNameAnywhere": {
			reason: "A DELETE that names no object cannot be verified: fail closed.",
			index:  noLookup(t),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "", ""),
			want:   result{Code: 400, Reason: metav1.StatusReasonBadRequest, Message: "lockguard could not verify Locks: the DELETE of a Stack.core.navique.com names no object"},
		},
		"LookupFails": {
			reason: "When Locks cannot be looked up, the handler errors so that failurePolicy Fail rejects the delete.",
			index: ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
				return nil, errors.New("the Lock cache has not synced yet")
			}),
			req: request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify Locks for Stack.core.navique.com forge/forge, so the delete is refused; retry when lockguard is ready: the Lock cache has not synced yet"},
		},
		"LockDeletion": {
			reason: "Deleting a Lock is never blocked, and does not even look Locks up.",
			index:  noLookup(t),
			req:    request(admissionv1.Delete, "core.navique.com", "Lock", "forge", "protect-forge-stack", ""),
			want:   result{Allowed: true, Code: 200, Message: lockv1alpha1.ErrLockTarget.Error()},
		},
		"Update": {
			reason: "Updates of a locked object are never blocked.",
			index:  noLookup(t),
			req:    request(admissionv1.Update, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Allowed: true, Code: 200, Message: "not a DELETE"},
		},
		"OtherGroup": {
			reason: "Resources outside core.navique.com are not lockguard's business.",
			index:  noLookup(t),
			req:    request(admissionv1.Delete, "apps", "Deployment", "forge", "forge", ""),
			want:   result{Allowed: true, Code: 200, Message: "only core.navique.com resources can be locked"},
		},
		"ClusterScoped": {
			reason: "Locks are namespaced: a cluster-scoped object cannot be locked.",
			index:  noLookup(t),
			req:    request(admissionv1.Delete, "core.navique.com", "Region", "", "eu", ""),
			want:   result{Allowed: true, Code: 200, Message: "cluster-scoped resources cannot be locked"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resultOf(NewHandler(Config{Locks: tc.index}).Decide(context.Background(), tc.req))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestHandle: controller-runtime's decoded request gets the same decision,
// oldObject read as the API server reads objects.
func TestHandle(t *testing.T) {
	const denied = "resource is protected by Lock(s) [l]; delete the Lock(s) before deleting this resource"
	cases := map[string]struct {
		reason    string
		oldObject string
		want      result
	}{
		"NameFromOldObject": {
			reason:    "Only oldObject's metadata.name is read; the rest is skipped.",
			oldObject: `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"name":"forge","namespace":"forge"},"spec":{"huge":[1,2,3]}}`,
			want:      result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: denied},
		},
		"OldObjectKeysAreCaseSensitive": {
			reason:    "Only metadata.name names the object, so a \"Name\" key cannot make the handler check another object (found by FuzzAdmissionReview).",
			oldObject: `{"metadata":{"name":"forge","Name":"free"},"Metadata":{"name":"free"}}`,
			want:      result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: denied},
		},
		"MalformedOldObject": {
			reason:    "An oldObject that is not JSON cannot be verified: fail closed.",
			oldObject: `{"metadata":`,
			want:      result{Code: 400, Reason: metav1.StatusReasonBadRequest, Message: "lockguard could not verify Locks: cannot read the Stack.core.navique.com being deleted: unexpected end of JSON input"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Delete,
				Kind:      metav1.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"},
				Namespace: "forge",
				OldObject: runtime.RawExtension{Raw: []byte(tc.oldObject)},
			}}
			got := resultOf(NewHandler(Config{Locks: indexOf(t, forgeStack, lock("l", ""))}).Handle(context.Background(), req))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
