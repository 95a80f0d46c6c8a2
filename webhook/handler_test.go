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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

func lock(name, reason string) lockv1alpha1.Lock {
	return lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.LockSpec{Reason: reason}}
}

// finderOf returns Locks for exactly one object and fails the test on any
// other lookup, so that each case also checks what the handler asked for.
func finderOf(t *testing.T, gk schema.GroupKind, obj types.NamespacedName, locks ...lockv1alpha1.Lock) LockFinderFunc {
	return func(_ context.Context, gotGK schema.GroupKind, gotObj types.NamespacedName) ([]lockv1alpha1.Lock, error) {
		if gotGK != gk || gotObj != obj {
			t.Errorf("FindLocks(%s, %s), want FindLocks(%s, %s)", gotGK, gotObj, gk, obj)
		}
		return locks, nil
	}
}

func noLookup(t *testing.T) LockFinderFunc {
	return func(context.Context, schema.GroupKind, types.NamespacedName) ([]lockv1alpha1.Lock, error) {
		t.Error("FindLocks called, want no lookup")
		return nil, nil
	}
}

func request(op admissionv1.Operation, group, kind, ns, name string, oldObject string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op,
		Kind:      metav1.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: kind},
		Namespace: ns,
		Name:      name,
		OldObject: runtime.RawExtension{Raw: []byte(oldObject)},
	}}
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

func TestHandle(t *testing.T) {
	stack := schema.GroupKind{Group: "core.navique.com", Kind: "Stack"}
	forge := types.NamespacedName{Namespace: "forge", Name: "forge"}
	const protected = "resource is protected by Lock(s) "
	const tail = "; delete the Lock(s) before deleting this resource"

	cases := map[string]struct {
		reason string
		finder LockFinder
		req    admission.Request
		want   result
	}{
		"SeedExample": {
			reason: "A Stack targeted by one Lock cannot be deleted; the message is the contract's, then the reason.",
			finder: finderOf(t, stack, forge, lock("protect-forge-stack", "Production")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[protect-forge-stack]" + tail + " (protect-forge-stack: Production)"},
		},
		"SortedNamesAllReasons": {
			reason: "Every matching Lock is named, sorted; reasons follow in the same order, Locks without a reason are skipped.",
			finder: finderOf(t, stack, forge, lock("zeta", "z"), lock("alpha", ""), lock("mid", "m")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[alpha mid zeta]" + tail + " (mid: m; zeta: z)"},
		},
		"NotLocked": {
			reason: "Without a Lock the delete is allowed.",
			finder: finderOf(t, stack, forge),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Allowed: true, Code: 200},
		},
		"DeleteCollectionNameFromOldObject": {
			reason: "A deletecollection names the object only in oldObject; only its metadata.name is read.",
			finder: finderOf(t, stack, forge, lock("l", "")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "", `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"name":"forge","namespace":"forge"},"spec":{"huge":[1,2,3]}}`),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[l]" + tail},
		},
		"OldObjectKeysAreCaseSensitive": {
			reason: "oldObject is read as the API server reads objects: only metadata.name names the object, so a \"Name\" key cannot make the handler check another object (found by FuzzAdmissionReview).",
			finder: finderOf(t, stack, forge, lock("l", "")),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "", `{"metadata":{"name":"forge","Name":"free"},"Metadata":{"name":"free"}}`),
			want:   result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: protected + "[l]" + tail},
		},
		"NoNameAnywhere": {
			reason: "A DELETE that names no object cannot be verified: fail closed.",
			finder: noLookup(t),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "", ""),
			want:   result{Code: 400, Reason: metav1.StatusReasonBadRequest, Message: "lockguard could not verify Locks: the DELETE of a Stack.core.navique.com names no object"},
		},
		"MalformedOldObject": {
			reason: "An oldObject that is not JSON cannot be verified: fail closed.",
			finder: noLookup(t),
			req:    request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "", `{"metadata":`),
			want:   result{Code: 400, Reason: metav1.StatusReasonBadRequest, Message: "lockguard could not verify Locks: cannot read the name of the Stack.core.navique.com being deleted: unexpected end of JSON input"},
		},
		"LookupFails": {
			reason: "When Locks cannot be looked up, the handler errors so that failurePolicy Fail rejects the delete.",
			finder: LockFinderFunc(func(context.Context, schema.GroupKind, types.NamespacedName) ([]lockv1alpha1.Lock, error) {
				return nil, errors.New("the Lock cache has not synced yet")
			}),
			req: request(admissionv1.Delete, "core.navique.com", "Stack", "forge", "forge", ""),
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify Locks for Stack.core.navique.com forge/forge, so the delete is refused; retry when lockguard is ready: the Lock cache has not synced yet"},
		},
		"LockDeletion": {
			reason: "Deleting a Lock is never blocked, and does not even look Locks up.",
			finder: noLookup(t),
			req:    request(admissionv1.Delete, "core.navique.com", "Lock", "forge", "protect-forge-stack", ""),
			want:   result{Allowed: true, Code: 200, Message: "deleting a Lock is never blocked"},
		},
		"Update": {
			reason: "Updates of a locked object are never blocked.",
			finder: noLookup(t),
			req:    request(admissionv1.Update, "core.navique.com", "Stack", "forge", "forge", ""),
			want:   result{Allowed: true, Code: 200, Message: "not a DELETE"},
		},
		"OtherGroup": {
			reason: "Resources outside core.navique.com are not lockguard's business.",
			finder: noLookup(t),
			req:    request(admissionv1.Delete, "apps", "Deployment", "forge", "forge", ""),
			want:   result{Allowed: true, Code: 200, Message: "not a core.navique.com resource"},
		},
		"ClusterScoped": {
			reason: "Locks are namespaced: a cluster-scoped object cannot be locked.",
			finder: noLookup(t),
			req:    request(admissionv1.Delete, "core.navique.com", "Region", "", "eu", ""),
			want:   result{Allowed: true, Code: 200, Message: "cluster-scoped resources cannot be locked"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := resultOf(NewHandler(tc.finder).Handle(context.Background(), tc.req))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
