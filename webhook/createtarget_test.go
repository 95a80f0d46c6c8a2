package webhook

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// targetCalls records what the admission of a Lock create asked of its
// collaborators, the TargetLabeler included, in order.
type targetCalls struct {
	collaborators
	targetErr error
}

func (c *targetCalls) LabelTarget(_ context.Context, key lockv1alpha1.TargetKey, _ string) error {
	c.calls = append(c.calls, "target "+key.Kind+" "+key.Namespace+"/"+key.Name)
	return c.targetErr
}

// TestCreateHandlerTargets: the target of an enforcing targetRef Lock is
// labelled (TargetLabeler) after the namespace, before the create is
// allowed; a missing target lets the create through; any other failure
// refuses it, retryably (TargetLabelRefusedRetry); a dry run, a selector
// Lock (without a SelectedLister) and an audit Lock label no target.
func TestCreateHandlerTargets(t *testing.T) {
	before := lockv1alpha1.OptedIn()
	if err := lockv1alpha1.SetOptedIn([]schema.GroupKind{{Kind: "PersistentVolumeClaim"}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lockv1alpha1.SetOptedIn(before); err != nil {
			t.Error(err)
		}
	})
	pvcLock := &lockv1alpha1.Lock{
		TypeMeta:   metav1.TypeMeta{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: "Lock"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep", UID: types.UID("u1")},
		Spec:       lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: "v1", Kind: "PersistentVolumeClaim", Name: "data"}},
	}
	audit := pvcLock.DeepCopy()
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	selector := pvcLock.DeepCopy()
	selector.Spec.TargetRef = lockv1alpha1.TargetReference{}
	selector.Spec.Selector = &lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}, Kinds: []string{"PersistentVolumeClaim"}}

	type want struct {
		Allowed bool
		Code    int32
		Retry   bool // the message begins with TargetLabelRefusedRetry
		Calls   []string
	}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, "data")
	cases := map[string]struct {
		reason    string
		l         *lockv1alpha1.Lock
		dryRun    bool
		targetErr error
		want      want
	}{
		"Labelled": {
			reason: "The namespace, then the target, then allowed.",
			l:      pvcLock,
			want:   want{Allowed: true, Code: http.StatusOK, Calls: []string{"label forge", "target PersistentVolumeClaim forge/data"}},
		},
		"Missing": {
			reason: "No target yet: nothing to delete; the reconciler labels it when it appears.",
			l:      pvcLock, targetErr: notFound,
			want: want{Allowed: true, Code: http.StatusOK, Calls: []string{"label forge", "target PersistentVolumeClaim forge/data"}},
		},
		"Fails": {
			reason: "A label that cannot be written refuses the create, retryably.",
			l:      pvcLock, targetErr: errors.New("connection refused"),
			want: want{Code: http.StatusServiceUnavailable, Retry: true, Calls: []string{"label forge", "target PersistentVolumeClaim forge/data"}},
		},
		"DryRun": {
			reason: "A dry run writes nothing (sideEffects NoneOnDryRun).",
			l:      pvcLock, dryRun: true,
			want: want{Allowed: true, Code: http.StatusOK},
		},
		"Audit": {
			reason: "An audit Lock refuses nothing: its target needs no label.",
			l:      audit,
			want:   want{Allowed: true, Code: http.StatusOK, Calls: []string{"label forge"}},
		},
		"Selector": {
			reason: "A selector Lock has no target: its objects are listed and labelled only with a SelectedLister (TestCreateHandlerSelected).",
			l:      selector,
			want:   want{Allowed: true, Code: http.StatusOK, Calls: []string{"label forge"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := &targetCalls{targetErr: tc.targetErr}
			resp := NewCreateHandler(CreateOptions{Labeler: c, Targets: c}).Handle(context.Background(), lockCreate(t, "forge", tc.l, tc.dryRun))
			got := want{Allowed: resp.Allowed, Code: http.StatusOK, Calls: c.calls}
			if resp.Result != nil && resp.Result.Code != 0 {
				got.Code = resp.Result.Code
				got.Retry = strings.HasPrefix(resp.Result.Message, TargetLabelRefusedRetry)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nHandle(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// TestProtectedTargetLabel: the create-time write puts ProtectedLabel and
// ProtectedPendingAnnotation on an opted-in target and keeps its other
// labels and annotations; a core.navique.com target and a kind not opted
// in are not written; a missing target is NotFound.
func TestProtectedTargetLabel(t *testing.T) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "data",
		Labels: map[string]string{"tier": "db"}, Annotations: map[string]string{"note": "x"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(pvc).Build()
	optedIn := func(gk schema.GroupKind) (schema.GroupVersionKind, bool, error) {
		if gk == (schema.GroupKind{Kind: "PersistentVolumeClaim"}) {
			return corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"), true, nil
		}
		return schema.GroupVersionKind{}, false, nil
	}
	labeler := ProtectedTargetLabel(optedIn, c)
	ctx := context.Background()
	before := time.Now().UTC().Truncate(time.Second)
	if err := labeler.LabelTarget(ctx, lockv1alpha1.TargetKey{Namespace: "forge", Kind: "PersistentVolumeClaim", Name: "data"}, "keep"); err != nil {
		t.Fatal(err)
	}
	got := &corev1.PersistentVolumeClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "forge", Name: "data"}, got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"tier": "db", lockv1alpha1.ProtectedLabel: "true"}, got.Labels); diff != "" {
		t.Errorf("labels after LabelTarget: -want, +got:\n%s", diff)
	}
	mark := got.Annotations[lockv1alpha1.ProtectedPendingAnnotation]
	when, by, _ := strings.Cut(mark, " ")
	at, err := time.Parse(time.RFC3339, when)
	if err != nil || at.Before(before) || by != "keep" || got.Annotations["note"] != "x" {
		t.Errorf("annotations after LabelTarget: %v (%v): want note=x and %s at or after %s, naming the Lock keep", got.Annotations, err, lockv1alpha1.ProtectedPendingAnnotation, before)
	}
	// Neither is written: a write would fail, as neither object exists.
	for _, key := range []lockv1alpha1.TargetKey{
		{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "app"},
		{Namespace: "forge", Kind: "Secret", Name: "creds"},
	} {
		if err := labeler.LabelTarget(ctx, key, "keep"); err != nil {
			t.Errorf("LabelTarget(%v) = %v, want nil (not written)", key, err)
		}
	}
	err = labeler.LabelTarget(ctx, lockv1alpha1.TargetKey{Namespace: "forge", Kind: "PersistentVolumeClaim", Name: "absent"}, "keep")
	if !apierrors.IsNotFound(err) {
		t.Errorf("LabelTarget(absent) = %v, want NotFound", err)
	}
}
