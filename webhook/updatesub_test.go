package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// scaleJSON is the autoscaling/v1 Scale of Stack forge/forge as the API
// server reviews it: the object's name, none of its labels.
func scaleJSON(replicas int) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"forge","namespace":"forge","uid":"u1","resourceVersion":"1","creationTimestamp":"2026-12-03T10:00:00Z"},"spec":{"replicas":%d},"status":{"replicas":1}}`, replicas)
}

// subresourceRequest is an UPDATE of subresource sub of Stack forge/forge
// by user, from oldObj to newObj, reviewed as kind kind.
func subresourceRequest(sub string, kind metav1.GroupVersionKind, user string, oldObj, newObj []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:         "u",
		Operation:   admissionv1.Update,
		Kind:        kind,
		Resource:    metav1.GroupVersionResource{Group: lockv1alpha1.Group, Version: "v1alpha1", Resource: "stacks"},
		SubResource: sub,
		Namespace:   "forge",
		Name:        "forge",
		UserInfo:    authenticationv1.UserInfo{Username: user},
		OldObject:   runtime.RawExtension{Raw: oldObj},
		Object:      runtime.RawExtension{Raw: newObj},
	}}
}

// TestUpdateGuardSubresources: an UPDATE through a subresource but status
// (issue 36) is refused under a ReadOnly Lock of the object it writes,
// whose kind and labels the guard reads (Parents): the review carries a
// Scale, without them.
func TestUpdateGuardSubresources(t *testing.T) {
	scaleKind := metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	stackKind := metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}
	frozen, plain := readOnlyLock("freeze", "change window"), lock("keep", "")
	scale := subresourceRequest("scale", scaleKind, "alice", scaleJSON(1), scaleJSON(5))
	denied := func(field string, locks ...lockv1alpha1.Lock) result {
		return result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: UpdateDenialMessage(locks, field)}
	}
	otherGroup := subresourceRequest("scale", scaleKind, "alice", scaleJSON(1), scaleJSON(5))
	otherGroup.Resource.Group = "apps"
	cases := map[string]struct {
		reason     string
		req        admission.Request
		parentsErr error
		noParents  bool
		locks      []lockv1alpha1.Lock
		want       result
		denied     []string
	}{
		"Scale": {
			reason: "A person's scale of an object a ReadOnly Lock covers is refused, naming the Lock and the subresource.",
			req:    scale,
			locks:  []lockv1alpha1.Lock{frozen, plain},
			want:   denied("the scale subresource", frozen),
			denied: []string{"freeze"},
		},
		"ScaleToSameReplicas": {
			reason:     "A scale that changes nothing is allowed without reading the object or the Locks.",
			req:        subresourceRequest("scale", scaleKind, "alice", scaleJSON(1), scaleJSON(1)),
			parentsErr: errors.New("must not be read"),
			want:       result{Allowed: true, Code: 200},
		},
		"ScaleCanNotDelete": {
			reason: "A CanNotDelete Lock never refuses a scale.",
			req:    scale,
			locks:  []lockv1alpha1.Lock{plain},
			want:   result{Allowed: true, Code: 200},
		},
		"OtherSubresource": {
			reason: "Any other subresource's UPDATE counts as a change, whatever its objects: refused.",
			req:    subresourceRequest("rollback", stackKind, "alice", stackJSON(1, `{}`), stackJSON(1, `{}`)),
			locks:  []lockv1alpha1.Lock{frozen},
			want:   denied("the rollback subresource", frozen),
			denied: []string{"freeze"},
		},
		"Status": {
			reason:     "The status subresource is never frozen.",
			req:        subresourceRequest("status", stackKind, "alice", stackJSON(1, `{}`), stackJSON(2, `{}`)),
			parentsErr: errors.New("must not be read"),
			want:       result{Allowed: true, Code: 200, Message: "the status subresource is never frozen"},
		},
		"Exempt": {
			reason:     "An exempt principal's scale is allowed.",
			req:        subresourceRequest("scale", scaleKind, "system:serviceaccount:navique-system:navique-operator", scaleJSON(1), scaleJSON(5)),
			parentsErr: errors.New("must not be read"),
			want:       result{Allowed: true, Code: 200, Message: "exempt from ReadOnly Locks"},
		},
		"OtherGroup": {
			reason:     "A subresource of another group is not lockguard's.",
			req:        otherGroup,
			parentsErr: errors.New("must not be read"),
			want:       result{Allowed: true, Code: 200, Message: lockv1alpha1.ErrNotProtectable.Error()},
		},
		"ParentUnreadable": {
			reason:     "An object whose labels cannot be read fails closed, retryably.",
			req:        scale,
			parentsErr: errors.New("connection refused"),
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify Locks for stacks.core.navique.com forge/forge, so the update of its scale subresource is refused; retry when lockguard is ready: connection refused"},
		},
		"NoParents": {
			reason:    "Without a reader of the object, a subresource update fails closed.",
			req:       scale,
			noParents: true,
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify Locks for stacks.core.navique.com forge/forge, so the update of its scale subresource is refused: it cannot read the object"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			log := &denialLog{}
			index := ByTarget(func(k lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
				if want := (lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}); k != want {
					t.Errorf("LiveLocks(%s), want LiveLocks(%s)", k, want)
				}
				return tc.locks, nil
			})
			var parents Parents = ParentsFunc(func(_ context.Context, gvr schema.GroupVersionResource, ns, name string) (string, map[string]string, error) {
				if want := (schema.GroupVersionResource{Group: lockv1alpha1.Group, Version: "v1alpha1", Resource: "stacks"}); gvr != want || ns != "forge" || name != "forge" {
					t.Errorf("Parent(%s, %s, %s), want Parent(%s, forge, forge)", gvr, ns, name, want)
				}
				return "Stack", map[string]string{"tier": "db"}, tc.parentsErr
			})
			if tc.noParents {
				parents = nil
			}
			exempt := Exemptions{Users: []string{"system:serviceaccount:navique-system:navique-operator"}}
			u := NewUpdateHandler(NewHandler(Config{Locks: index, Denials: log}), exempt, parents)
			resp := u.Handle(t.Context(), tc.req)
			if diff := cmp.Diff(tc.want, resultOf(resp)); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
			var denied []string
			if len(log.locks) > 0 {
				denied = log.locks[0]
				if d := log.denials[0]; d.Operation != "UPDATE" || d.Kind != "Stack" || d.Name != "forge" {
					t.Errorf("%s\nrecorded %+v, want an UPDATE of Stack forge", tc.reason, d)
				}
			}
			if diff := cmp.Diff(tc.denied, denied, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nrecorded lastDenied Locks: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
