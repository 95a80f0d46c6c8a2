package webhook

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestUnlockHandler: what reaches UnlockPath comes from principals without
// the unlock verb (the entry's matchConditions): every Lock delete is
// refused, an update only when it lowers the Lock (docs/contract.md rule 18).
func TestUnlockHandler(t *testing.T) {
	lock := func(level lockv1alpha1.LockLevel, reason string) runtime.RawExtension {
		raw, err := json.Marshal(&lockv1alpha1.Lock{
			TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "db-lock"},
			Spec:       lockv1alpha1.LockSpec{Level: level, Reason: reason},
		})
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: raw}
	}
	type want struct {
		Allowed bool
		Message string
	}
	cases := map[string]struct {
		reason      string
		op          admissionv1.Operation
		subresource string
		name        string
		old, obj    runtime.RawExtension
		want        want
	}{
		"Delete": {reason: "deleting a Lock needs unlock", op: admissionv1.Delete, old: lock(lockv1alpha1.LevelCanNotDelete, ""),
			want: want{Message: lockv1alpha1.UnlockDeleteMessage("prod", "db-lock")}},
		"LowerLevel": {reason: "ReadOnly to CanNotDelete needs unlock", op: admissionv1.Update,
			old: lock(lockv1alpha1.LevelReadOnly, ""), obj: lock(lockv1alpha1.LevelCanNotDelete, ""),
			want: want{Message: lockv1alpha1.UnlockLowerMessage(lockv1alpha1.LoweredLevel, "prod", "db-lock")}},
		"RaiseLevel": {reason: "raising the level is free", op: admissionv1.Update,
			old: lock(lockv1alpha1.LevelCanNotDelete, ""), obj: lock(lockv1alpha1.LevelReadOnly, ""), want: want{Allowed: true}},
		"NewReason": {reason: "a new reason lowers nothing", op: admissionv1.Update,
			old: lock(lockv1alpha1.LevelReadOnly, "a"), obj: lock(lockv1alpha1.LevelReadOnly, "b"), want: want{Allowed: true}},
		"Status": {reason: "the status subresource is not the Lock's protection", op: admissionv1.Update, subresource: "status",
			old: lock(lockv1alpha1.LevelReadOnly, ""), obj: lock(lockv1alpha1.LevelCanNotDelete, ""), want: want{Allowed: true}},
		"Create": {reason: "creating protects more", op: admissionv1.Create, obj: lock(lockv1alpha1.LevelReadOnly, ""), want: want{Allowed: true}},
		"Undecodable": {reason: "fail closed", op: admissionv1.Update, old: runtime.RawExtension{Raw: []byte("{")}, obj: lock("", ""),
			want: want{Message: "lockguard could not decode the Lock being changed in prod: unexpected end of JSON input"}},
		"DeleteCollection": {reason: "a deletecollection's request names no Lock: its old object does", op: admissionv1.Delete, name: "-",
			old: lock(lockv1alpha1.LevelCanNotDelete, ""), want: want{Message: lockv1alpha1.UnlockDeleteMessage("prod", "db-lock")}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			name := "db-lock"
			if tc.name == "-" {
				name = ""
			}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Kind:      metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Lock"},
				Operation: tc.op, SubResource: tc.subresource, Namespace: "prod", Name: name,
				OldObject: tc.old, Object: tc.obj,
			}}
			resp := NewUnlockHandler(nil).Handle(context.Background(), req)
			got := want{Allowed: resp.Allowed}
			if resp.Result != nil {
				got.Message = resp.Result.Message
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
