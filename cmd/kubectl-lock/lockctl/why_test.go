package lockctl

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/navique/lockguard/webhook"
)

func TestDeleteRequest(t *testing.T) {
	obj := map[string]any{
		"apiVersion": "core.navique.com/v1alpha1",
		"kind":       "Stack",
		"metadata":   map[string]any{"name": "forge", "namespace": "prod", "uid": "u-1"},
		"spec":       map[string]any{"size": "small"},
	}
	got, err := deleteRequest(schema.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"}, "prod", "forge", obj)
	if err != nil {
		t.Fatal(err)
	}
	want := webhook.Request{
		UID:       "kubectl-lock-why",
		Kind:      metav1.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"},
		Name:      "forge",
		Namespace: "prod",
		Operation: admissionv1.Delete,
		UserInfo:  webhook.UserInfo{Username: "kubectl-lock-why"},
		DryRun:    true,
		OldObject: webhook.Object{Metadata: webhook.ObjectMeta{Name: "forge", UID: "u-1"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("The request is a dry-run DELETE of the object, as the API server sends it.\ndeleteRequest(...): -want, +got:\n%s", diff)
	}
}

func TestLockNamesIn(t *testing.T) {
	cases := map[string]struct {
		reason string
		msg    string
		want   []string
	}{
		"Object": {
			reason: "The object guard's denial names its Locks.",
			msg:    "resource is protected by Lock(s) [a b]; delete the Lock(s) before deleting this resource (a: x [y])",
			want:   []string{"a", "b"},
		},
		"Qualified": {
			reason: "A CRD denial names namespace/name.",
			msg:    "customresourcedefinition is protected by Lock(s) [ns/a ns/b]; delete ...",
			want:   []string{"ns/a", "ns/b"},
		},
		"None": {
			reason: "A message without Locks names none.",
			msg:    "lockguard could not verify Locks",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, lockNamesIn(tc.msg)); diff != "" {
				t.Errorf("%s\nlockNamesIn(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
