package webhook

import (
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// readOnlyLock is a Lock of level ReadOnly.
func readOnlyLock(name, reason string) lockv1alpha1.Lock {
	l := lock(name, reason)
	l.Spec.Level = lockv1alpha1.LevelReadOnly
	return l
}

// stackJSON is a Stack as a review carries it.
func stackJSON(replicas int, labels string) []byte {
	return fmt.Appendf(nil, `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"name":"forge","namespace":"forge","uid":"u1","resourceVersion":"1","labels":%s},"spec":{"replicas":%d}}`, labels, replicas)
}

// updateRequest is an UPDATE of Stack forge/forge from oldObj to newObj
// by user.
func updateRequest(user string, groups []string, oldObj, newObj []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "u",
		Operation: admissionv1.Update,
		Kind:      metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
		Namespace: "forge",
		Name:      "forge",
		UserInfo:  authenticationv1.UserInfo{Username: user, Groups: groups},
		OldObject: runtime.RawExtension{Raw: oldObj},
		Object:    runtime.RawExtension{Raw: newObj},
	}}
}

func TestUpdateGuard(t *testing.T) {
	const labelled = `{"tier":"db","core.navique.com/read-only":"true"}`
	before, after := stackJSON(1, labelled), stackJSON(2, labelled)
	frozen, plain := readOnlyLock("freeze", "change window"), lock("keep", "")
	spec := func(locks ...lockv1alpha1.Lock) result {
		return result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: UpdateDenialMessage(locks, "spec")}
	}
	exempt := Exemptions{Users: []string{"system:serviceaccount:navique-system:navique-operator"}, Groups: []string{"operators"}, Self: func() string { return "lockguard" }}
	dryRun := updateRequest("alice", nil, before, after)
	dryRun.DryRun = ptr.To(true)
	status := updateRequest("alice", nil, before, after)
	status.SubResource = "status"
	notUpdate := updateRequest("alice", nil, before, after)
	notUpdate.Operation = admissionv1.Delete
	lockUpdate := updateRequest("alice", nil, before, after)
	lockUpdate.Kind.Kind = "Lock"
	cases := map[string]struct {
		reason string
		req    admission.Request
		locks  []lockv1alpha1.Lock
		err    error
		want   result
		denied []string
	}{
		"SpecChange": {
			reason: "A person's spec change of an object a ReadOnly Lock covers is refused, naming the Lock and the field.",
			req:    updateRequest("alice", nil, before, after),
			locks:  []lockv1alpha1.Lock{frozen, plain},
			want:   spec(frozen),
			denied: []string{"freeze"},
		},
		"DryRun": {
			reason: "A dry run gets the same answer, and records nothing.",
			req:    dryRun,
			locks:  []lockv1alpha1.Lock{frozen},
			want:   spec(frozen),
		},
		"CanNotDeleteOnly": {
			reason: "A CanNotDelete Lock never refuses an update (rule 7).",
			req:    updateRequest("alice", nil, before, after),
			locks:  []lockv1alpha1.Lock{plain},
			want:   result{Allowed: true, Code: 200},
		},
		"NoChange": {
			reason: "An update that changes nothing frozen is allowed without reading Locks.",
			req:    updateRequest("alice", nil, before, stackJSON(1, `{"tier":"db","core.navique.com/read-only":"true"}`)),
			err:    errors.New("must not be read"),
			want:   result{Allowed: true, Code: 200},
		},
		"LabelRemoved": {
			reason: "Relabelling out of the selector is a frozen change; the Locks are those of the old labels.",
			req:    updateRequest("alice", nil, before, stackJSON(1, `{"core.navique.com/read-only":"true"}`)),
			locks:  []lockv1alpha1.Lock{frozen},
			want:   result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: UpdateDenialMessage([]lockv1alpha1.Lock{frozen}, "metadata.labels[tier]")},
			denied: []string{"freeze"},
		},
		"ExemptUser": {
			reason: "A configured exempt user is allowed.",
			req:    updateRequest("system:serviceaccount:navique-system:navique-operator", nil, before, after),
			err:    errors.New("must not be read"),
			want:   result{Allowed: true, Code: 200, Message: "exempt from ReadOnly Locks"},
		},
		"ExemptGroup": {
			reason: "A member of a configured exempt group is allowed.",
			req:    updateRequest("bob", []string{"system:authenticated", "operators"}, before, after),
			err:    errors.New("must not be read"),
			want:   result{Allowed: true, Code: 200, Message: "exempt from ReadOnly Locks"},
		},
		"Self": {
			reason: "lockguard itself is allowed.",
			req:    updateRequest("lockguard", nil, before, after),
			err:    errors.New("must not be read"),
			want:   result{Allowed: true, Code: 200, Message: "exempt from ReadOnly Locks"},
		},
		"Status": {
			reason: "The status subresource is never frozen.",
			req:    status,
			err:    errors.New("must not be read"),
			want:   result{Allowed: true, Code: 200, Message: "the status subresource is never frozen"},
		},
		"NotAnUpdate": {
			reason: "Anything but an UPDATE is allowed.",
			req:    notUpdate,
			want:   result{Allowed: true, Code: 200, Message: "not an UPDATE"},
		},
		"ALock": {
			reason: "Locks are never frozen.",
			req:    lockUpdate,
			want:   result{Allowed: true, Code: 200, Message: lockv1alpha1.ErrLockTarget.Error()},
		},
		"LookupError": {
			reason: "Locks that cannot be read fail closed, retryably.",
			req:    updateRequest("alice", nil, before, after),
			err:    errors.New("cache not synced"),
			want: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify Locks for Stack.core.navique.com forge/forge, so the update is refused; retry when lockguard is ready: cache not synced"},
		},
		"NoOldObject": {
			reason: "An update without oldObject cannot be decided: refused.",
			req:    updateRequest("alice", nil, nil, after),
			want: result{Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest,
				Message: "lockguard could not verify Locks: cannot read the Stack.core.navique.com being updated: the review carries none"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			log := &denialLog{}
			index := ByTarget(func(k lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) {
				if want := (lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}); k != want {
					t.Errorf("LiveLocks(%s), want LiveLocks(%s)", k, want)
				}
				return tc.locks, tc.err
			})
			u := NewUpdateHandler(NewHandler(Config{Locks: index, Denials: log}), exempt, nil)
			resp := u.Handle(t.Context(), tc.req)
			if diff := cmp.Diff(tc.want, resultOf(resp)); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
			var denied []string
			if len(log.locks) > 0 {
				denied = log.locks[0]
				if d := log.denials[0]; d.Operation != "UPDATE" || d.User != tc.req.UserInfo.Username || d.Kind != "Stack" || d.Name != "forge" {
					t.Errorf("%s\nrecorded %+v, want an UPDATE of Stack forge by %s", tc.reason, d, tc.req.UserInfo.Username)
				}
			}
			if diff := cmp.Diff(tc.denied, denied, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s\nrecorded lastDenied Locks: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func TestParseExemptions(t *testing.T) {
	cases := map[string]struct {
		reason string
		in     []string
		want   Exemptions
		err    string
	}{
		"Repeated": {
			reason: "The flag repeats.",
			in:     []string{"system:serviceaccount:a:b", "group:ops"},
			want:   Exemptions{Users: []string{"system:serviceaccount:a:b"}, Groups: []string{"ops"}},
		},
		"Commas": {
			reason: "Entries may be comma separated, with blanks around them.",
			in:     []string{"system:serviceaccount:a:b, group:ops,,carol"},
			want:   Exemptions{Users: []string{"system:serviceaccount:a:b", "carol"}, Groups: []string{"ops"}},
		},
		"EmptyGroup": {
			reason: "group: alone names nothing.",
			in:     []string{"group:"},
			err:    `exempt principal "group:" names no group`,
		},
		"Authenticated": {
			reason: "system:authenticated holds every authenticated user: exempting it exempts everyone (issue 36).",
			in:     []string{"system:serviceaccount:a:b", "group:system:authenticated"},
			err:    `exempt principal "group:system:authenticated" would exempt everyone: the group system:authenticated holds every authenticated user; name the operator's ServiceAccount or a group of its own instead`,
		},
		"Unauthenticated": {
			reason: "system:unauthenticated holds every anonymous request.",
			in:     []string{"group:system:unauthenticated"},
			err:    `exempt principal "group:system:unauthenticated" would exempt everyone: the group system:unauthenticated holds every unauthenticated request; name the operator's ServiceAccount or a group of its own instead`,
		},
		"EveryServiceAccount": {
			reason: "system:serviceaccounts holds every ServiceAccount of every namespace.",
			in:     []string{"group:system:serviceaccounts"},
			err:    `exempt principal "group:system:serviceaccounts" would exempt everyone: the group system:serviceaccounts holds every ServiceAccount of every namespace; name the operator's ServiceAccount or a group of its own instead`,
		},
		"Anonymous": {
			reason: "system:anonymous is the user of every unauthenticated request.",
			in:     []string{"system:anonymous"},
			err:    `exempt principal "system:anonymous" would exempt everyone: the user system:anonymous is every unauthenticated request; name the operator's ServiceAccount or a group of its own instead`,
		},
		"Blanks": {
			reason: "Blanks inside the entry do not hide an everyone group.",
			in:     []string{" group: system:authenticated "},
			err:    `exempt principal "group: system:authenticated" would exempt everyone: the group system:authenticated holds every authenticated user; name the operator's ServiceAccount or a group of its own instead`,
		},
		"NamespaceServiceAccounts": {
			reason: "system:serviceaccounts:NAMESPACE holds the ServiceAccounts of one namespace (the operator's, say): allowed.",
			in:     []string{"group:system:serviceaccounts:navique-system"},
			want:   Exemptions{Groups: []string{"system:serviceaccounts:navique-system"}},
		},
		"Masters": {
			reason: "system:masters holds the cluster's superusers, who can remove the webhook configuration anyway: allowed.",
			in:     []string{"group:system:masters"},
			want:   Exemptions{Groups: []string{"system:masters"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseExemptions(tc.in)
			var gotErr string
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.err {
				t.Fatalf("%s\nParseExemptions(%q) error %q, want %q", tc.reason, tc.in, gotErr, tc.err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.IgnoreFields(Exemptions{}, "Self")); diff != "" {
				t.Errorf("%s\nParseExemptions(%q): -want, +got:\n%s", tc.reason, tc.in, diff)
			}
		})
	}
}
