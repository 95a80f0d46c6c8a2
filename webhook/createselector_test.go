package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// selectedCalls records, safely from the label workers, what the
// admission of a selector Lock's create asked of its collaborators.
type selectedCalls struct {
	mu       sync.Mutex
	calls    []string
	objects  map[string][]lockv1alpha1.Object // by Kind
	marks    map[string]string                // pending marks, by name
	listErr  error
	labelErr error
	gone     string // a name whose label write is NotFound
}

func (c *selectedCalls) record(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, s)
}

func (c *selectedCalls) AnnounceLock(_ context.Context, l *lockv1alpha1.Lock) error {
	c.record("announce " + l.Namespace + "/" + l.Name)
	return nil
}

func (c *selectedCalls) LabelNamespace(_ context.Context, ns string) error {
	c.record("label " + ns)
	return nil
}

func (c *selectedCalls) LabelTarget(_ context.Context, key lockv1alpha1.TargetKey, _ string) error {
	c.record("target " + key.Kind + " " + key.Namespace + "/" + key.Name)
	if key.Name == c.gone {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, key.Name)
	}
	return c.labelErr
}

func (c *selectedCalls) ListSelected(_ context.Context, ns string, gk schema.GroupKind, sel labels.Selector, limit int64) ([]Selected, bool, error) {
	c.record(fmt.Sprintf("list %s %s %s", gk.Kind, ns, sel))
	if c.listErr != nil {
		return nil, false, c.listErr
	}
	var out []Selected
	for _, o := range c.objects[gk.Kind] {
		if o.Namespace == ns && sel.Matches(labels.Set(o.Labels)) {
			out = append(out, Selected{Object: o, Mark: c.marks[o.Name]})
		}
	}
	if int64(len(out)) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// sorted returns the calls with the label writes, which the workers make
// in any order, sorted among themselves.
func (c *selectedCalls) sorted() []string {
	i := slices.IndexFunc(c.calls, func(s string) bool { return strings.HasPrefix(s, "target ") })
	if i < 0 {
		return c.calls
	}
	out := slices.Clone(c.calls)
	slices.Sort(out[i:])
	return out
}

// TestCreateHandlerSelected: the objects of opted-in kinds that an
// enforcing selector Lock covers (listed with its label selector, per
// opted-in kind its kinds name) are labelled (TargetLabeler) after the
// namespace, before the create is allowed; one gone meanwhile needs no
// label; a list or a write that fails refuses the create, retryably; more
// than SelectorLabelCap refuses it, before anything is written; a dry
// run, an audit Lock and a selector naming no opted-in kind list nothing.
func TestCreateHandlerSelected(t *testing.T) {
	before := lockv1alpha1.OptedIn()
	if err := lockv1alpha1.SetOptedIn([]schema.GroupKind{{Kind: "PersistentVolumeClaim"}, {Kind: "Secret"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lockv1alpha1.SetOptedIn(before); err != nil {
			t.Error(err)
		}
	})
	db := map[string]string{"tier": "db"}
	obj := func(kind, name string, lbls map[string]string) lockv1alpha1.Object {
		return lockv1alpha1.Object{Namespace: "forge", Kind: kind, Name: name, Labels: lbls}
	}
	objects := map[string][]lockv1alpha1.Object{
		"PersistentVolumeClaim": {obj("PersistentVolumeClaim", "a", db), obj("PersistentVolumeClaim", "b", db), obj("PersistentVolumeClaim", "web", map[string]string{"tier": "web"})},
		"Secret":                {obj("Secret", "creds", db)},
	}
	var many []lockv1alpha1.Object
	for i := range SelectorLabelCap + 1 {
		many = append(many, obj("PersistentVolumeClaim", fmt.Sprintf("p%d", i), db))
	}
	exactly := many[:SelectorLabelCap]
	// What a refused attempt of the create of "keep" left: a, b and creds
	// labelled, a and creds a moment ago, b long enough ago that its mark
	// no longer lasts as long as a new one would; web by another Lock.
	marked := map[string]string{"tier": "db", lockv1alpha1.ProtectedLabel: "true"}
	mark := func(ago time.Duration, by string) string {
		return time.Now().Add(-ago).UTC().Format(time.RFC3339) + " " + by
	}
	retried := map[string][]lockv1alpha1.Object{
		"PersistentVolumeClaim": {obj("PersistentVolumeClaim", "a", marked), obj("PersistentVolumeClaim", "b", marked),
			obj("PersistentVolumeClaim", "c", db), obj("PersistentVolumeClaim", "d", marked)},
		"Secret": {obj("Secret", "creds", marked)},
	}
	retriedMarks := map[string]string{"a": mark(time.Second, "keep"), "b": mark(lockv1alpha1.ProtectedPendingGrace*2/3, "keep"),
		"d": mark(time.Second, "other"), "creds": mark(0, "keep")}
	sel := &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep", UID: types.UID("u1")},
		Spec:       lockv1alpha1.LockSpec{Selector: &lockv1alpha1.LockSelector{MatchLabels: db, Kinds: []string{"Stack", "PersistentVolumeClaim", "Secret"}}},
	}
	audit := sel.DeepCopy()
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	groupOnly := sel.DeepCopy()
	groupOnly.Spec.Selector.Kinds = []string{"Stack"}
	pvcOnly := sel.DeepCopy()
	pvcOnly.Spec.Selector.Kinds = []string{"PersistentVolumeClaim"}

	listed := []string{"list PersistentVolumeClaim forge tier=db", "list Secret forge tier=db"}
	labelled := append(slices.Clone(listed), "announce forge/keep", "label forge",
		"target PersistentVolumeClaim forge/a", "target PersistentVolumeClaim forge/b", "target Secret forge/creds")
	type want struct {
		Allowed bool
		Code    int32
		Retry   bool // the message begins with TargetLabelRefusedRetry
		Cap     bool // the message is SelectorCapMessage
		Calls   []string
	}
	cases := map[string]struct {
		reason   string
		l        *lockv1alpha1.Lock
		dryRun   bool
		objects  map[string][]lockv1alpha1.Object
		marks    map[string]string
		listErr  error
		labelErr error
		gone     string
		want     want
	}{
		"Retried": {
			reason: "Objects labelled by an attempt of the same create a moment ago are not labelled again; the others are.",
			l:      sel, objects: retried, marks: retriedMarks,
			want: want{Allowed: true, Code: http.StatusOK, Calls: append(slices.Clone(listed), "announce forge/keep", "label forge",
				"target PersistentVolumeClaim forge/b", "target PersistentVolumeClaim forge/c", "target PersistentVolumeClaim forge/d")},
		},
		"OverCapLabelledBefore": {
			reason: "The cap counts the objects labelled before too.",
			l:      pvcOnly, objects: map[string][]lockv1alpha1.Object{"PersistentVolumeClaim": append(slices.Clone(exactly), obj("PersistentVolumeClaim", "a", marked))},
			marks: map[string]string{"a": mark(0, "keep")},
			want:  want{Code: http.StatusForbidden, Cap: true, Calls: listed[:1]},
		},
		"Labelled": {
			reason: "Listed per opted-in kind before any write; labelled after the namespace; then allowed.",
			l:      sel, objects: objects,
			want: want{Allowed: true, Code: http.StatusOK, Calls: labelled},
		},
		"Gone": {
			reason: "An object deleted since the list needs no label.",
			l:      sel, objects: objects, gone: "b",
			want: want{Allowed: true, Code: http.StatusOK, Calls: labelled},
		},
		"WriteFails": {
			reason: "A label that cannot be written refuses the create, retryably.",
			l:      sel, objects: objects, labelErr: errors.New("connection refused"),
			want: want{Code: http.StatusServiceUnavailable, Retry: true, Calls: labelled},
		},
		"ListFails": {
			reason: "Objects that cannot be listed refuse the create, retryably, before anything is written.",
			l:      sel, objects: objects, listErr: errors.New("connection refused"),
			want: want{Code: http.StatusServiceUnavailable, Retry: true, Calls: listed[:1]},
		},
		"AtCap": {
			reason: "SelectorLabelCap objects are labelled.",
			l:      pvcOnly, objects: map[string][]lockv1alpha1.Object{"PersistentVolumeClaim": exactly},
			want: want{Allowed: true, Code: http.StatusOK},
		},
		"OverCap": {
			reason: "One more is refused, with nothing written.",
			l:      pvcOnly, objects: map[string][]lockv1alpha1.Object{"PersistentVolumeClaim": many},
			want: want{Code: http.StatusForbidden, Cap: true, Calls: listed[:1]},
		},
		"OverCapAcrossKinds": {
			reason: "The cap counts every kind's objects together.",
			l:      sel, objects: map[string][]lockv1alpha1.Object{"PersistentVolumeClaim": exactly, "Secret": objects["Secret"]},
			want: want{Code: http.StatusForbidden, Cap: true, Calls: listed},
		},
		"DryRun": {
			reason: "A dry run lists, as the create would, and writes nothing.",
			l:      sel, objects: objects, dryRun: true,
			want: want{Allowed: true, Code: http.StatusOK, Calls: listed},
		},
		"DryRunOverCap": {
			reason: "A dry run gets the create's answer: past the cap, refused, with nothing written.",
			l:      pvcOnly, objects: map[string][]lockv1alpha1.Object{"PersistentVolumeClaim": many}, dryRun: true,
			want: want{Code: http.StatusForbidden, Cap: true, Calls: listed[:1]},
		},
		"Audit": {
			reason: "An audit Lock refuses nothing: its objects need no label.",
			l:      audit, objects: objects,
			want: want{Allowed: true, Code: http.StatusOK, Calls: []string{"announce forge/keep", "label forge"}},
		},
		"GroupKindsOnly": {
			reason: "A selector naming no opted-in kind has nothing to label.",
			l:      groupOnly, objects: objects,
			want: want{Allowed: true, Code: http.StatusOK, Calls: []string{"announce forge/keep", "label forge"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &selectedCalls{objects: tc.objects, marks: tc.marks, listErr: tc.listErr, labelErr: tc.labelErr, gone: tc.gone}
			resp := NewCreateHandler(CreateOptions{Announcer: c, Labeler: c, Targets: c, Selected: c}).Handle(context.Background(), lockCreate(t, "forge", tc.l, tc.dryRun))
			got := want{Allowed: resp.Allowed, Code: http.StatusOK, Calls: c.sorted()}
			if resp.Result != nil && resp.Result.Code != 0 {
				got.Code = resp.Result.Code
				got.Retry = strings.HasPrefix(resp.Result.Message, TargetLabelRefusedRetry)
				got.Cap = resp.Result.Message == SelectorCapMessage(tc.l, tc.l.SelectorOptedInKinds(time.Now()))
			}
			if name == "AtCap" {
				// SelectorLabelCap writes: checked by count.
				if n := len(got.Calls); n != 3+SelectorLabelCap {
					t.Errorf("%s: %d calls, want %d", tc.reason, n, 3+SelectorLabelCap)
				}
				got.Calls = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// pagedReader serves a PartialObjectMetadataList in pages of at most two
// items, fewer than asked, as the API server may with a label selector.
type pagedReader struct {
	client.Reader
	items []metav1.PartialObjectMetadata
	lists int
}

func (r *pagedReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	r.lists++
	o := (&client.ListOptions{}).ApplyOptions(opts)
	start := 0
	if o.Continue != "" {
		_, _ = fmt.Sscan(o.Continue, &start)
	}
	end := min(start+2, start+int(o.Limit), len(r.items))
	l := list.(*metav1.PartialObjectMetadataList)
	l.Items = slices.Clone(r.items[start:end])
	if end < len(r.items) {
		l.Continue = fmt.Sprint(end)
	}
	return nil
}

// TestOptedInObjects: the lister reads on past a short page until it has
// limit objects or the last page, says whether more remain, and lists
// nothing of a kind not opted in.
func TestOptedInObjects(t *testing.T) {
	var items []metav1.PartialObjectMetadata
	for i := range 5 {
		items = append(items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"tier": "db"}}})
	}
	items[0].Annotations = map[string]string{lockv1alpha1.ProtectedPendingAnnotation: "2026-12-05T13:00:00Z keep"}
	optedIn := func(gk schema.GroupKind) (schema.GroupVersionKind, bool, error) {
		return schema.GroupVersionKind{Version: "v1", Kind: gk.Kind}, gk.Kind == "PersistentVolumeClaim", nil
	}
	sel := labels.SelectorFromSet(labels.Set{"tier": "db"})
	for _, tc := range []struct {
		limit int64
		n     int
		more  bool
		lists int
	}{{limit: 3, n: 3, more: true, lists: 2}, {limit: 5, n: 5, more: false, lists: 3}, {limit: 6, n: 5, more: false, lists: 3}} {
		r := &pagedReader{items: items}
		objs, more, err := OptedInObjects(optedIn, r).ListSelected(context.Background(), "forge", schema.GroupKind{Kind: "PersistentVolumeClaim"}, sel, tc.limit)
		if err != nil || len(objs) != tc.n || more != tc.more || r.lists != tc.lists {
			t.Errorf("limit %d: got %d objects, more %v, %d lists, %v; want %d, %v, %d", tc.limit, len(objs), more, r.lists, err, tc.n, tc.more, tc.lists)
		}
		if len(objs) > 0 && (objs[0].Kind != "PersistentVolumeClaim" || objs[0].Labels["tier"] != "db" || objs[0].Mark != "2026-12-05T13:00:00Z keep") {
			t.Errorf("limit %d: first object %+v", tc.limit, objs[0])
		}
	}
	r := &pagedReader{items: items}
	if objs, _, err := OptedInObjects(optedIn, r).ListSelected(context.Background(), "forge", schema.GroupKind{Kind: "Secret"}, sel, 3); err != nil || objs != nil || r.lists != 0 {
		t.Errorf("a kind not opted in: got %v, %v after %d lists; want none, no list", objs, err, r.lists)
	}
}
