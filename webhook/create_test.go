package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// collaborators record, in calls, what the admission of a Lock create
// asked of its Announcer and its Labeler, in order.
type collaborators struct {
	calls       []string
	announceErr error
	labelErr    error
}

func (c *collaborators) AnnounceLock(_ context.Context, l *lockv1alpha1.Lock) error {
	c.calls = append(c.calls, "announce "+l.Namespace+"/"+l.Name)
	return c.announceErr
}

func (c *collaborators) LabelNamespace(_ context.Context, ns string) error {
	c.calls = append(c.calls, "label "+ns)
	return c.labelErr
}

// lockCreate is the admission request of the create of l in namespace ns.
func lockCreate(t *testing.T, ns string, l *lockv1alpha1.Lock, dryRun bool) admission.Request {
	t.Helper()
	return createReview(t, "Lock", ns, l.Name, l, dryRun)
}

// createReview is the admission request of the create of obj, a
// core.navique.com/v1alpha1 object of kind named name, in namespace ns.
func createReview(t *testing.T, kind, ns, name string, obj any, dryRun bool) admission.Request {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "r", Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: kind},
		Namespace: ns, Name: name, Object: runtime.RawExtension{Raw: raw}, DryRun: ptr.To(dryRun),
	}}
}

// TestCreateHandler: a Lock create is allowed once the peers were told
// (Announcer) and then the namespace labelled (Labeler), each only when
// configured; either failing refuses it, retryably (HTTP 503 saying
// lockv1alpha1.CreateRefusedRetry); a dry run, another request and a Lock
// that protects nothing call neither; a review that is not the API
// server's is refused.
func TestCreateHandler(t *testing.T) {
	live := &lockv1alpha1.Lock{
		TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep", UID: types.UID("u1")},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Stack", Name: "app"}},
	}
	onALock := live.DeepCopy()
	onALock.Spec.TargetRef.Kind = "Lock"
	noUID := live.DeepCopy()
	noUID.UID = ""
	update := lockCreate(t, "forge", live, false)
	update.Operation = admissionv1.Update
	garbage := lockCreate(t, "forge", live, false)
	garbage.Object.Raw = []byte("{")

	type want struct {
		Allowed bool
		Code    int32
		Retry   bool // the message says lockv1alpha1.CreateRefusedRetry
		Calls   []string
	}
	cases := map[string]struct {
		reason             string
		announce, label    bool
		announceErr, lbErr error
		req                admission.Request
		want               want
	}{
		"Both": {
			reason:   "Peers and the namespace guard: told, then labelled, then allowed.",
			announce: true, label: true, req: lockCreate(t, "forge", live, false),
			want: want{Allowed: true, Code: http.StatusOK, Calls: []string{"announce forge/keep", "label forge"}},
		},
		"LabelOnly": {
			reason: "Without the peer protocol the namespace is still labelled before the create is allowed.",
			label:  true, req: lockCreate(t, "forge", live, false),
			want: want{Allowed: true, Code: http.StatusOK, Calls: []string{"label forge"}},
		},
		"AnnounceOnly": {
			reason:   "Without the namespace guard the peers are told, and nothing is labelled.",
			announce: true, req: lockCreate(t, "forge", live, false),
			want: want{Allowed: true, Code: http.StatusOK, Calls: []string{"announce forge/keep"}},
		},
		"Neither": {
			reason: "With both off every create is allowed as it comes, even one that does not decode.",
			req:    garbage,
			want:   want{Allowed: true, Code: http.StatusOK},
		},
		"AnnounceFails": {
			reason:   "A replica that could not be told refuses the create, retryably, before any label is written.",
			announce: true, label: true, announceErr: errors.New("replica 127.0.0.2:9443 did not answer"), req: lockCreate(t, "forge", live, false),
			want: want{Code: http.StatusServiceUnavailable, Retry: true, Calls: []string{"announce forge/keep"}},
		},
		"LabelFails": {
			reason:   "A label that cannot be written refuses the create, retryably.",
			announce: true, label: true, lbErr: errors.New(`namespaces "forge" is forbidden`), req: lockCreate(t, "forge", live, false),
			want: want{Code: http.StatusServiceUnavailable, Retry: true, Calls: []string{"announce forge/keep", "label forge"}},
		},
		"DryRun": {
			reason:   "A dry run writes nothing and tells no one.",
			announce: true, label: true, req: lockCreate(t, "forge", live, true),
			want: want{Allowed: true, Code: http.StatusOK},
		},
		"NotACreate": {
			reason:   "Only creates are admitted here.",
			announce: true, label: true, req: update,
			want: want{Allowed: true, Code: http.StatusOK},
		},
		"ProtectsNothing": {
			reason:   "A Lock on a Lock protects nothing: no delete can depend on it.",
			announce: true, label: true, req: lockCreate(t, "forge", onALock, false),
			want: want{Allowed: true, Code: http.StatusOK},
		},
		"OtherNamespace": {
			reason:   "A review whose Lock is of another namespace than the request is not the API server's.",
			announce: true, label: true, req: lockCreate(t, "elsewhere", live, false),
			want: want{Code: http.StatusBadRequest},
		},
		"NoUID": {
			reason:   "The API server sets the name and UID before admission.",
			announce: true, label: true, req: lockCreate(t, "forge", noUID, false),
			want: want{Code: http.StatusBadRequest},
		},
		"Undecodable": {
			reason:   "An object that is not a Lock is refused.",
			announce: true, label: true, req: garbage,
			want: want{Code: http.StatusBadRequest},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &collaborators{announceErr: tc.announceErr, labelErr: tc.lbErr}
			var o CreateOptions
			if tc.announce {
				o.Announcer = c
			}
			if tc.label {
				o.Labeler = c
			}
			resp := NewCreateHandler(o).Handle(context.Background(), tc.req)
			got := want{Allowed: resp.Allowed, Code: http.StatusOK, Calls: c.calls}
			if resp.Result != nil && resp.Result.Code != 0 {
				got.Code = resp.Result.Code
				got.Retry = strings.Contains(resp.Result.Message, lockv1alpha1.CreateRefusedRetry)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestNamespaceLabel: the create-time write puts HasLocksLabel on the
// namespace and keeps its other labels.
func TestNamespaceLabel(t *testing.T) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "forge", Labels: map[string]string{"team": "a"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(ns).Build()
	if err := NamespaceLabel(c).LabelNamespace(context.Background(), "forge"); err != nil {
		t.Fatal(err)
	}
	got := &corev1.Namespace{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "forge"}, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"team": "a", lockv1alpha1.HasLocksLabel: "true"}, got.Labels); diff != "" {
		t.Errorf("labels after LabelNamespace: -want, +got:\n%s", diff)
	}
	if err := NamespaceLabel(c).LabelNamespace(context.Background(), "absent"); err == nil {
		t.Error("LabelNamespace of a namespace that does not exist: no error, want one (the create is refused)")
	}
}

// TestCreateRefusesWhatTheAPIServerWouldNotSend is issue 36's second
// attack at the door: the API server validates a Lock's metadata and its
// schema before admission, so a Lock-create review whose Lock it would
// not have admitted (names that are no DNS subdomain or label, a field
// over the CRD's bounds) is forged. It is refused as a bad request,
// naming each field, before the peers are told or any label written.
func TestCreateRefusesWhatTheAPIServerWouldNotSend(t *testing.T) {
	const (
		prefix    = "lockguard got a Lock create that the API server would not have admitted: "
		subdomain = `a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`
		label     = `a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`
	)
	a64 := strings.Repeat("a", 64)
	base := func(edit func(l *lockv1alpha1.Lock)) *lockv1alpha1.Lock {
		l := &lockv1alpha1.Lock{
			TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep", UID: types.UID("0d6c3b4e-2f6a-4c1e-9c39-6f0e6f0b7a11")},
			Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Stack", Name: "app"}},
		}
		edit(l)
		return l
	}
	cases := map[string]struct {
		reason string
		lock   *lockv1alpha1.Lock
		want   string
	}{
		"Slash": {
			reason: "A name with a slash is no DNS subdomain (and its GET would never reach the API server).",
			lock:   base(func(l *lockv1alpha1.Lock) { l.Name = "a/b" }),
			want:   prefix + `metadata.name "a/b": ` + subdomain,
		},
		"Percent": {
			reason: "Nor one with a percent sign.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.Name = "a%2Fb" }),
			want:   prefix + `metadata.name "a%2Fb": ` + subdomain,
		},
		"OneMiBName": {
			reason: "A name over 253 bytes; the message quotes 64 of them.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.Name = strings.Repeat("a", 1<<20) }),
			want:   prefix + `metadata.name "` + a64 + `"... (1048576 bytes): must be no more than 253 characters`,
		},
		"Namespace": {
			reason: "A namespace is a DNS label.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.Namespace = "Forge" }),
			want:   prefix + `metadata.namespace "Forge": ` + label,
		},
		"NoUID": {
			reason: "The API server sets the UID before admission.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.UID = "" }),
			want:   prefix + `metadata.uid "": must be set (the API server sets it before admission)`,
		},
		"LongUID": {
			reason: "The API server's UIDs are UUIDs, 36 characters.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.UID = types.UID(strings.Repeat("u", 37)) }),
			want:   prefix + `metadata.uid "` + strings.Repeat("u", 37) + `": must be no more than 36 characters`,
		},
		"LongTarget": {
			reason: "The CRD bounds spec.targetRef.name at 253 bytes.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.Spec.TargetRef.Name = strings.Repeat("a", 254) }),
			want:   prefix + `spec.targetRef.name "` + a64 + `"... (254 bytes): must be no more than 253 characters`,
		},
		"LongKind": {
			reason: "The CRD bounds spec.targetRef.kind at 63 bytes.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.Spec.TargetRef.Kind = "S" + strings.Repeat("a", 63) }),
			want:   prefix + `spec.targetRef.kind "S` + strings.Repeat("a", 63) + `": must be no more than 63 characters`,
		},
		"KindCharacters": {
			reason: "A kind is letters and digits, starting with a letter, in every version of the CRD.",
			lock:   base(func(l *lockv1alpha1.Lock) { l.Spec.TargetRef.Kind = "Stack/x" }),
			want:   prefix + `spec.targetRef.kind "Stack/x": must be letters and digits, starting with a letter (a Kind, e.g. Stack)`,
		},
		"Several": {
			reason: "Each field that is wrong is named, in the order of the Lock.",
			lock: base(func(l *lockv1alpha1.Lock) {
				l.Name = "a/b"
				l.Spec.TargetRef.Name = ""
			}),
			want: prefix + `metadata.name "a/b": ` + subdomain + `, spec.targetRef.name "": must be set`,
		},
		"SelectorLock": {
			reason: "A selector Lock's name is checked as any other.",
			lock: base(func(l *lockv1alpha1.Lock) {
				l.Name = "a/b"
				l.Spec.TargetRef = lockv1alpha1.TargetReference{}
				l.Spec.Selector = &lockv1alpha1.LockSelector{}
			}),
			want: prefix + `metadata.name "a/b": ` + subdomain,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &collaborators{}
			resp := NewCreateHandler(CreateOptions{Announcer: c, Labeler: c}).Handle(context.Background(), lockCreate(t, tc.lock.Namespace, tc.lock, false))
			type answer struct {
				Allowed bool
				Code    int32
				Reason  metav1.StatusReason
				Message string
				Calls   []string
			}
			got := answer{Allowed: resp.Allowed}
			for _, call := range c.calls {
				got.Calls = append(got.Calls, call[:min(len(call), 80)]) // not 1 MiB of diff
			}
			if resp.Result != nil {
				got.Code, got.Reason, got.Message = resp.Result.Code, resp.Result.Reason, resp.Result.Message
			}
			want := answer{Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: tc.want}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
