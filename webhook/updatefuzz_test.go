package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// FuzzUpdateServeHTTP posts arbitrary bodies to the update guard as
// cmd/lockguard/manager registers it at webhook.UpdatePath, and checks, like
// FuzzServeHTTP for deletes, that it never panics, that every answer is a
// clean HTTP 4xx or an HTTP 200 carrying a v1 AdmissionReview with the
// request's UID, and that it never allows an UPDATE that a live ReadOnly
// Lock of updateFuzzLocks refuses: a well-formed UPDATE of the Lock's
// target, by a principal that is not exempt, that changes what ReadOnly
// freezes (lockv1alpha1.FrozenChange of its oldObject and object), of the
// main resource or through its scale subresource, or through any other
// subresource but status.
func FuzzUpdateServeHTTP(f *testing.F) {
	frozenLabels := `{"core.navique.com/read-only":"true"}`
	before := updateStack("forge", 1, frozenLabels)
	for _, body := range [][]byte{
		updateReview("alice", "forge", "", before, updateStack("forge", 2, frozenLabels), false),
		updateReview("alice", "forge", "", before, updateStack("forge", 2, frozenLabels), true),
		updateReview("alice", "forge", "", before, before, false),
		updateReview("alice", "forge", "", before, updateStack("forge", 1, `{}`), false),
		updateReview("alice", "forge", "status", before, updateStack("forge", 2, frozenLabels), false),
		updateReview("alice", "forge", "scale", updateScale(1), updateScale(2), false),
		updateReview("alice", "forge", "scale", updateScale(1), updateScale(1), false),
		updateReview("alice", "forge", "rollback", before, before, false),
		updateReview(exemptUser, "forge", "", before, updateStack("forge", 2, frozenLabels), false),
		updateReview("alice", "free", "", updateStack("free", 1, `{}`), updateStack("free", 2, `{}`), false),
		updateReview("alice", "forge", "", `null`, `{"metadata":`, false),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
		[]byte(`{}`), []byte(`null`), []byte(``), []byte(`{"request":`), []byte("\x00\xff"),
	} {
		for _, ct := range []string{"application/json", "text/plain", ""} {
			f.Add(body, ct)
		}
	}
	handlers := updateFuzzHandlers(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		for _, h := range handlers {
			req := httptest.NewRequest(http.MethodPost, webhook.UpdatePath, bytes.NewReader(body))
			if contentType != "" {
				req.Header.Set("Content-Type", contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			resp := checkEnvelope(t, body, rec)
			if resp == nil {
				continue
			}
			if in := parseReview(body); mustRefuseUpdate(in.Request) && resp.Allowed {
				t.Fatalf("ALLOWED an update that ReadOnly Lock freeze-forge refuses: %q", clip(body))
			}
		}
	})
}

// exemptUser is the fuzzed handlers' exempt principal.
const exemptUser = "system:serviceaccount:navique-system:navique-operator"

// updateFuzzLocks are fuzzLocks and a ReadOnly Lock of Stack forge/forge.
var updateFuzzLocks = func() []lockv1alpha1.Lock {
	l := fuzzLock("forge", "freeze-forge", "", "Stack", "forge", "")
	l.Spec.Level = lockv1alpha1.LevelReadOnly
	return append([]lockv1alpha1.Lock{l}, fuzzLocks...)
}()

// updateFuzzHandlers are the update guards under test: one deciding from
// the Lock index of updateFuzzLocks, one whose index is empty and that
// confirms with an API server holding them.
func updateFuzzHandlers(tb testing.TB) []http.Handler {
	list := &lockv1alpha1.LockList{}
	for i := range updateFuzzLocks {
		list.Items = append(list.Items, *updateFuzzLocks[i].DeepCopy())
	}
	exempt := webhook.Exemptions{Users: []string{exemptUser}}
	empty := webhook.ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil })
	// Every object of the group is a Stack, unlabelled.
	parents := webhook.ParentsFunc(func(_ context.Context, gvr schema.GroupVersionResource, _, _ string) (string, map[string]string, error) {
		if gvr.Group != lockv1alpha1.Group || gvr.Resource != "stacks" {
			return "", nil, fmt.Errorf("no resource %s", gvr)
		}
		return "Stack", nil, nil
	})
	return []http.Handler{
		webhook.NewUpdateHandler(webhook.NewHandler(webhook.Config{Locks: lockIndexOf(tb, list)}), exempt, parents),
		webhook.NewUpdateHandler(webhook.NewHandler(webhook.Config{Locks: empty, Live: apiServer(updateFuzzLocks)}), exempt, parents),
	}
}

// mustRefuseUpdate reports whether the Lock state refuses req: an UPDATE
// of Stack forge/forge (freeze-forge's target), by a user other than
// exemptUser, through any subresource but status and scale, or of the
// main resource or scale, whose objects decode and differ in what
// ReadOnly freezes.
func mustRefuseUpdate(req *admissionv1.AdmissionRequest) bool {
	if req.Operation != admissionv1.Update || req.SubResource == webhook.StatusSubresource ||
		req.Namespace != "forge" || req.Name != "forge" || req.UserInfo.Username == exemptUser {
		return false
	}
	switch {
	case req.SubResource != "":
		if req.Resource.Group != lockv1alpha1.Group || req.Resource.Resource != "stacks" {
			return false
		}
		if req.SubResource != webhook.ScaleSubresource {
			return true
		}
	case req.Kind.Group != lockv1alpha1.Group || req.Kind.Kind != "Stack":
		return false
	}
	var oldObj, newObj map[string]any
	if utiljson.Unmarshal(req.OldObject.Raw, &oldObj) != nil || utiljson.Unmarshal(req.Object.Raw, &newObj) != nil || oldObj == nil || newObj == nil {
		return false
	}
	_, changed := lockv1alpha1.FrozenChange(oldObj, newObj)
	return changed
}

// checkEnvelope checks that rec, the answer to body, is a clean refusal
// (nil) or an HTTP 200 carrying a v1 AdmissionReview response with the
// UID of body's request (returned).
func checkEnvelope(t *testing.T, body []byte, rec *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	if rec.Code >= 400 && rec.Code < 500 {
		return nil
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d %q for body %q: want 200 with an AdmissionReview, or a 4xx", rec.Code, rec.Body.String(), clip(body))
	}
	in := parseReview(body)
	if in == nil {
		t.Fatalf("HTTP 200 %q for a body that is not an AdmissionReview: %q", clip(rec.Body.Bytes()), clip(body))
	}
	var out admissionv1.AdmissionReview
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v: %q", err, clip(rec.Body.Bytes()))
	}
	if out.APIVersion != admissionv1.SchemeGroupVersion.String() || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID != in.Request.UID {
		t.Fatalf("answer is not a v1 AdmissionReview response to UID %q: %q", in.Request.UID, clip(rec.Body.Bytes()))
	}
	return out.Response
}

// updateStack is a serialized Stack ns forge named name.
func updateStack(name string, replicas int, labels string) string {
	return `{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"name":"` + name + `","namespace":"forge","labels":` + labels + `},"spec":{"replicas":` + strings.Repeat("1", replicas) + `}}`
}

// updateScale is a serialized autoscaling/v1 Scale of Stack forge/forge.
func updateScale(replicas int) string {
	return fmt.Sprintf(`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"forge","namespace":"forge"},"spec":{"replicas":%d}}`, replicas)
}

// updateReview is a well-formed v1 AdmissionReview of an UPDATE of Stack
// forge/name by user, its objects spliced in raw.
func updateReview(user, name, subresource, oldObject, object string, dryRun bool) []byte {
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         "705ab4f5-6393-11e8-b7cc-42010a800003",
			Kind:        metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
			Resource:    metav1.GroupVersionResource{Group: lockv1alpha1.Group, Version: "v1alpha1", Resource: "stacks"},
			SubResource: subresource,
			Name:        name,
			Namespace:   "forge",
			Operation:   admissionv1.Update,
			UserInfo:    authenticationv1.UserInfo{Username: user},
			DryRun:      ptr.To(dryRun),
		},
	}
	data, err := json.Marshal(ar)
	if err != nil {
		panic(err)
	}
	data = bytes.Replace(data, []byte(`"object":null`), []byte(`"object":`+object), 1)
	return bytes.Replace(data, []byte(`"oldObject":null`), []byte(`"oldObject":`+oldObject), 1)
}
