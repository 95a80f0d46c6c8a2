package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/webhook"
)

// The fuzz targets post requests to the HTTP handler lockguard serves at
// webhook.Path, the same constructor cmd/lockguard/manager registers, and check
// three properties on every answer:
//
//   - it never panics;
//   - it is either a clean HTTP 4xx, or an HTTP 200 carrying a v1
//     AdmissionReview whose response has the request's UID (and only for a
//     body that is an AdmissionReview with a request);
//   - it never allows a DELETE that the Lock state denies: for a well-formed
//     DELETE of a namespaced core.navique.com object other than a Lock, the
//     delete is allowed if and only if no live Lock of fuzzLocks targets its
//     namespace, group, kind and name (the name is request.name or, for a
//     deletecollection, oldObject's metadata.name as the API server
//     serializes it). A dry run gets the same answer.

// fuzzHandlers are the handlers under test, as cmd/lockguard/manager registers
// them at webhook.Path: one deciding from lockguard's Lock index of
// fuzzLocks alone (--cache-only-decisions), and one whose index is empty,
// so that every decision is taken by the confirmation from an API server
// holding fuzzLocks.
func fuzzHandlers(tb testing.TB) []http.Handler {
	list := &lockv1alpha1.LockList{}
	for i := range fuzzLocks {
		list.Items = append(list.Items, *fuzzLocks[i].DeepCopy())
	}
	empty := webhook.ByTarget(func(lockv1alpha1.TargetKey) ([]lockv1alpha1.Lock, error) { return nil, nil })
	return []http.Handler{
		webhook.NewHandler(webhook.Config{Locks: lockIndexOf(tb, list)}),
		webhook.NewHandler(webhook.Config{Locks: empty, Live: apiServer(fuzzLocks)}),
	}
}

// apiServer answers a List of Locks with those of locks in the list's
// namespace, as an API server holding locks does.
type apiServer []lockv1alpha1.Lock

func (a apiServer) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	out, ok := list.(*lockv1alpha1.LockList)
	if !ok {
		return fmt.Errorf("listing %T, want a LockList", list)
	}
	for i := range a {
		if a[i].Namespace == o.Namespace {
			out.Items = append(out.Items, *a[i].DeepCopy())
		}
	}
	return nil
}

// fuzzLocks is the fixed Lock state of the fuzz targets: live Locks,
// stacked Locks, a Lock through another version, and Locks that do not
// count (being deleted, another group, a Lock on a Lock, an unparsable
// apiVersion).
var fuzzLocks = []lockv1alpha1.Lock{
	fuzzLock("forge", "protect-forge", "", "Stack", "forge", "Production"),
	fuzzLock("forge", "also-forge", "core.navique.com/v1beta1", "Stack", "forge", ""),
	fuzzLock("forge", "protect-db", "core.navique.com/v1alpha1", "PostgresCluster", "db", "data"),
	fuzzLock("forge", "dots", "", "Stack", "a.b-c", ""),
	fuzzLock("other", "protect-x", "", "Stack", "x", ""),
	withDeletion(fuzzLock("forge", "going", "", "Stack", "gone", "")),
	fuzzLock("forge", "wrong-group", "apps/v1", "Deployment", "web", ""),
	fuzzLock("forge", "on-a-lock", "", "Lock", "protect-forge", ""),
	fuzzLock("forge", "bad-version", "core.navique.com/v1/x", "Stack", "bad", ""),
}

func fuzzLock(ns, name, apiVersion, kind, target, reason string) lockv1alpha1.Lock {
	return lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: lockv1alpha1.LockSpec{
			TargetRef: lockv1alpha1.TargetReference{APIVersion: apiVersion, Kind: kind, Name: target},
			Reason:    reason,
		},
	}
}

func withDeletion(l lockv1alpha1.Lock) lockv1alpha1.Lock {
	l.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	l.Finalizers = []string{"example.com/keep"}
	return l
}

// liveLocks is the Lock state's answer, written from the contract: the
// Locks in ns that exist, are not being deleted, have a valid target (the
// core.navique.com group, not a Lock) and target group, kind and name.
func liveLocks(ns string, gk schema.GroupKind, name string) []lockv1alpha1.Lock {
	var out []lockv1alpha1.Lock
	for _, l := range fuzzLocks {
		if l.Namespace != ns || l.DeletionTimestamp != nil {
			continue
		}
		lgk, err := l.Spec.TargetRef.GroupKind()
		if err != nil || lgk.Group != lockv1alpha1.Group || lgk.Kind == "Lock" {
			continue
		}
		if lgk == gk && l.Spec.TargetRef.Name == name {
			out = append(out, l)
		}
	}
	return out
}

// post sends body to h and returns the recorded answer.
func post(h http.Handler, contentType string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, webhook.Path, bytes.NewReader(body))
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// parseReview decodes body the way the API server encodes a review: a JSON
// admission.k8s.io/v1 AdmissionReview, keys matched case-sensitively. It
// returns nil for anything else.
func parseReview(body []byte) *admissionv1.AdmissionReview {
	var r admissionv1.AdmissionReview
	if err := utiljson.Unmarshal(body, &r); err != nil {
		return nil
	}
	if r.APIVersion != admissionv1.SchemeGroupVersion.String() || r.Kind != "AdmissionReview" || r.Request == nil {
		return nil
	}
	return &r
}

// verdict is what the Lock state says of a request.
type verdict int

const (
	noClaim  verdict = iota // not a well-formed DELETE that Locks decide
	mustDeny                // live Locks target the object
	mustAllow
)

// judge returns the Lock state's verdict on req, and the Locks that deny it.
func judge(req *admissionv1.AdmissionRequest) (verdict, []lockv1alpha1.Lock) {
	if req.Kind.Group == lockv1alpha1.Group && req.Kind.Kind == "Lock" {
		return mustAllow, nil // deleting a Lock is never blocked
	}
	if req.Operation != admissionv1.Delete {
		return mustAllow, nil // deletes only
	}
	if req.Kind.Group != lockv1alpha1.Group || req.Kind.Kind == "" || req.Namespace == "" {
		return noClaim, nil
	}
	name := req.Name
	if name == "" {
		var obj struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := utiljson.Unmarshal(req.OldObject.Raw, &obj); err != nil || obj.Metadata.Name == "" {
			return noClaim, nil
		}
		name = obj.Metadata.Name
	}
	locks := liveLocks(req.Namespace, schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}, name)
	if len(locks) > 0 {
		return mustDeny, locks
	}
	return mustAllow, nil
}

// checkAnswer checks the properties of h's answer rec to body. Any body
// must not get a delete allowed that Locks deny; a canonical one (JSON as
// the API server writes it) must also get the exact denial, or be allowed
// when no live Lock denies it.
func checkAnswer(t *testing.T, body []byte, canonical bool, rec *httptest.ResponseRecorder) *admissionv1.AdmissionResponse {
	t.Helper()
	if rec.Code >= 400 && rec.Code < 500 {
		return nil // a clean refusal
	}
	if rec.Code != http.StatusOK {
		t.Fatalf("HTTP %d %q for body %q: want 200 with an AdmissionReview, or a 4xx", rec.Code, rec.Body.String(), clip(body))
	}
	in := parseReview(body)
	if in == nil {
		t.Fatalf("HTTP 200 %q for a body that is not an AdmissionReview: %q", clip(rec.Body.Bytes()), clip(body))
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("answer Content-Type %q, want application/json", ct)
	}
	var out admissionv1.AdmissionReview
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("answer is not an AdmissionReview: %v: %q", err, clip(rec.Body.Bytes()))
	}
	if out.APIVersion != admissionv1.SchemeGroupVersion.String() || out.Kind != "AdmissionReview" || out.Response == nil || out.Request != nil {
		t.Fatalf("answer is not a v1 AdmissionReview response: %q", clip(rec.Body.Bytes()))
	}
	if out.Response.UID != in.Request.UID {
		t.Fatalf("answer UID %q, want the request's %q", out.Response.UID, in.Request.UID)
	}
	resp := out.Response
	switch v, locks := judge(in.Request); v {
	case mustDeny:
		if resp.Allowed {
			t.Fatalf("ALLOWED a delete that Locks %v deny: %q", names(locks), clip(body))
		}
		if canonical && (resp.Result == nil || resp.Result.Code != http.StatusForbidden || resp.Result.Message != webhook.DenialMessage(locks)) {
			t.Fatalf("denied with %+v, want 403 %q", resp.Result, webhook.DenialMessage(locks))
		}
	case mustAllow:
		if canonical && !resp.Allowed {
			t.Fatalf("denied %+v a request that no live Lock denies: %q", resp.Result, clip(body))
		}
	}
	return resp
}

func names(locks []lockv1alpha1.Lock) []string {
	var n []string
	for _, l := range locks {
		n = append(n, l.Name)
	}
	slices.Sort(n)
	return n
}

// clip shortens data for a failure message.
func clip(data []byte) string {
	if len(data) > 600 {
		return string(data[:600]) + fmt.Sprintf("...(%d bytes)", len(data))
	}
	return string(data)
}

// review is a well-formed v1 AdmissionReview.
func review(op admissionv1.Operation, group, version, kind, ns, name string, oldObject string, dryRun bool) []byte {
	ar := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:         "705ab4f5-6393-11e8-b7cc-42010a800002",
			Kind:        metav1.GroupVersionKind{Group: group, Version: version, Kind: kind},
			Resource:    metav1.GroupVersionResource{Group: group, Version: version, Resource: strings.ToLower(kind) + "s"},
			RequestKind: &metav1.GroupVersionKind{Group: group, Version: version, Kind: kind},
			Name:        name,
			Namespace:   ns,
			Operation:   op,
			UserInfo:    authenticationv1.UserInfo{Username: "alice"},
			DryRun:      ptr.To(dryRun),
			Options:     runtime.RawExtension{Raw: []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1"}`)},
		},
	}
	data, err := json.Marshal(ar)
	if err != nil {
		panic(err)
	}
	if oldObject != "" {
		// Spliced in raw, so that a malformed oldObject stays malformed.
		data = bytes.Replace(data, []byte(`"oldObject":null`), []byte(`"oldObject":`+oldObject), 1)
	}
	return data
}

// stack returns a serialized Stack named name with an extra spec payload.
func stack(ns, name string, payload int) string {
	return fmt.Sprintf(`{"apiVersion":"core.navique.com/v1alpha1","kind":"Stack","metadata":{"namespace":%q,"uid":"b1a2","annotations":{"core.navique.com/locked":"protect-forge"}},"spec":{"payload":%q},"metadata":{"name":%q,"namespace":%q}}`,
		ns, strings.Repeat("x", payload), name, ns)
}

// FuzzServeHTTP posts arbitrary bodies with a few content types.
func FuzzServeHTTP(f *testing.F) {
	for _, body := range [][]byte{
		review(admissionv1.Delete, "core.navique.com", "v1alpha1", "Stack", "forge", "forge", "", false),
		review(admissionv1.Delete, "core.navique.com", "v1beta1", "Stack", "forge", "", stack("forge", "forge", 10), true),
		review(admissionv1.Delete, "core.navique.com", "v1alpha1", "Stack", "forge", "unlocked", "", false),
		review(admissionv1.Update, "core.navique.com", "v1alpha1", "Stack", "forge", "forge", "", false),
		review(admissionv1.Delete, "core.navique.com", "v1alpha1", "Lock", "forge", "protect-forge", "", false),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"u","operation":"DELETE","kind":{"group":"core.navique.com","version":"v1alpha1","kind":"Stack"},"namespace":"forge","name":"forge"}}`),
		[]byte("apiVersion: admission.k8s.io/v1\nkind: AdmissionReview\nrequest:\n  uid: u\n  operation: DELETE\n"),
		[]byte(`{}`), []byte(`null`), []byte(`[]`), []byte(``), []byte(`{"request":`), []byte("\x00\xff"),
	} {
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "text/plain", ""} {
			f.Add(body, ct)
		}
	}
	handlers := fuzzHandlers(f)
	f.Fuzz(func(t *testing.T, body []byte, contentType string) {
		for _, h := range handlers {
			checkAnswer(t, body, false, post(h, contentType, body))
		}
	})
}

// FuzzAdmissionReview posts well-formed AdmissionReviews built from fuzzed
// fields: odd operations, groups, kinds and versions, missing names and
// namespaces, any oldObject (malformed, huge, with the name in odd places),
// and each as a real and a dry-run delete, which must get the same answer.
func FuzzAdmissionReview(f *testing.F) {
	type seed struct {
		op, group, version, kind, ns, name, oldObject string
	}
	seeds := []seed{
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "forge", ""},
		{"DELETE", "core.navique.com", "v1beta1", "Stack", "forge", "forge", ""},
		{"DELETE", "core.navique.com", "v1alpha1", "PostgresCluster", "forge", "db", ""},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "", stack("forge", "forge", 16)},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "", stack("forge", "unlocked", 16)},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "", `{"metadata":`},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "", `"forge"`},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "", `null`},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "", `{"metadata":{"name":7}}`},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "forge", `{"metadata":{"name":"free"}}`},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "gone", ""},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "a.b-c", ""},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "other", "x", ""},
		{"DELETE", "core.navique.com", "v1alpha1", "Stack", "", "forge", ""},
		{"DELETE", "core.navique.com", "v1alpha1", "Lock", "forge", "protect-forge", ""},
		{"DELETE", "core.navique.com", "v1alpha1", "", "forge", "forge", ""},
		{"DELETE", "Core.Navique.com", "v1alpha1", "Stack", "forge", "forge", ""},
		{"DELETE", "apps", "v1", "Deployment", "forge", "web", ""},
		{"delete", "core.navique.com", "v1alpha1", "Stack", "forge", "forge", ""},
		{"UPDATE", "core.navique.com", "v1alpha1", "Stack", "forge", "forge", ""},
		{"CREATE", "core.navique.com", "v1alpha1", "Stack", "forge", "forge", ""},
		{"CONNECT", "core.navique.com", "v1alpha1", "Stack", "forge", "forge", ""},
		{"", "core.navique.com", "v1alpha1", "Stack", "forge", "forge", ""},
	}
	for _, s := range seeds {
		f.Add(s.op, s.group, s.version, s.kind, s.ns, s.name, []byte(s.oldObject))
	}
	// The regression seeds are in webhook/testdata/fuzz; huge oldObjects
	// are in TestHugeOldObjects, where they do not slow the fuzzer down.
	handlers := fuzzHandlers(f)
	f.Fuzz(func(t *testing.T, op, group, version, kind, ns, name string, oldObject []byte) {
		for _, h := range handlers {
			checkReview(t, h, op, group, version, kind, ns, name, oldObject)
		}
	})
}

// checkReview posts the review of these fields, as a real and as a dry-run
// delete, checks both answers and that they agree.
func checkReview(t *testing.T, h http.Handler, op, group, version, kind, ns, name string, oldObject []byte) {
	t.Helper()
	var answers [2]*admissionv1.AdmissionResponse
	for i, dryRun := range []bool{false, true} {
		body := review(admissionv1.Operation(op), group, version, kind, ns, name, string(oldObject), dryRun)
		answers[i] = checkAnswer(t, body, json.Valid(oldObject), post(h, "application/json", body))
	}
	real, dry := answers[0], answers[1]
	if (real == nil) != (dry == nil) || real != nil && (real.Allowed != dry.Allowed || !equalResult(real.Result, dry.Result)) {
		t.Fatalf("a dry run got another answer:\n  real %+v\n  dry  %+v", real, dry)
	}
}

// TestHugeOldObjects runs FuzzAdmissionReview's checks on deletecollection
// reviews whose oldObject is huge, with its name after megabytes of spec,
// or nested past the JSON decoders' depth limit: the name must be found,
// not mistaken, and the limit must fail closed.
func TestHugeOldObjects(t *testing.T) {
	handlers := fuzzHandlers(t)
	for name, oldObject := range map[string]string{
		"LockedAfter4MiB":     stack("forge", "forge", 4<<20),
		"UnlockedAfter4MiB":   stack("forge", "free", 4<<20),
		"LockedAfterManyKeys": `{"spec":{` + strings.Repeat(`"k":"v",`, 200000) + `"k":"v"},"metadata":{"name":"forge"}}`,
		"NestedPastTheLimit":  `{"metadata":{"name":"forge"},"spec":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`,
	} {
		t.Run(name, func(t *testing.T) {
			for _, h := range handlers {
				checkReview(t, h, "DELETE", "core.navique.com", "v1alpha1", "Stack", "forge", "", []byte(oldObject))
			}
		})
	}
}

func equalResult(a, b *metav1.Status) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Code == b.Code && a.Message == b.Message && a.Reason == b.Reason
}

// TestIndexAndConfirmationAgree: the Lock index (cache-only decisions) and
// the confirmation from the API server decide the DELETE of every object a
// Lock of fuzzLocks names, and of a few no Lock names, alike, as the
// contract says: both derive which Locks count from Lock.LiveTarget.
func TestIndexAndConfirmationAgree(t *testing.T) {
	handlers := fuzzHandlers(t)
	type target struct{ group, kind, ns, name string }
	targets := []target{{"core.navique.com", "Stack", "forge", "nothing"}, {"core.navique.com", "Gateway", "forge", "forge"}}
	for _, l := range fuzzLocks {
		gv, _ := schema.ParseGroupVersion(l.Spec.TargetRef.APIVersion)
		if l.Spec.TargetRef.APIVersion == "" {
			gv = lockv1alpha1.GroupVersion
		}
		targets = append(targets, target{gv.Group, l.Spec.TargetRef.Kind, l.Namespace, l.Spec.TargetRef.Name})
	}
	for _, tg := range targets {
		body := review(admissionv1.Delete, tg.group, "v1", tg.kind, tg.ns, tg.name, "", false)
		var answers []*admissionv1.AdmissionResponse
		for _, h := range handlers {
			answers = append(answers, checkAnswer(t, body, true, post(h, "application/json", body)))
		}
		if a, b := answers[0], answers[1]; a == nil || b == nil || a.Allowed != b.Allowed || !equalResult(a.Result, b.Result) {
			t.Errorf("DELETE of %+v: the index answers %+v, the confirmation %+v", tg, a, b)
		}
	}
}
