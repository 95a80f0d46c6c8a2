package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestClusterLockCreate: a ClusterLock's create is allowed once its target
// is labelled; a missing target, an unserved or namespaced kind, an
// invalid ClusterLock and a dry run are allowed (the first three after
// trying, the others without a label); an expired one is refused, dry run
// or not (rule 19, as a Lock's create); when RBAC refuses the
// label, the create is refused with the kubectl label command; any other
// failure refuses it retryably (503). A ReadOnly ClusterLock's target is
// labelled read-only too, an audit one's as well (its updates reach
// lockguard, which warns of them: rule 20).
func TestClusterLockCreate(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	role := clusterLock("keep-admin", "rbac.authorization.k8s.io/v1", "ClusterRole", "admin-all")
	expired := clusterLock("old", "v1", "Namespace", "prod")
	expired.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Second)}
	readOnly := clusterLock("freeze-prod", "v1", "Namespace", "prod")
	readOnly.Spec.Level = lockv1alpha1.LevelReadOnly
	readOnlyRole := *role.DeepCopy()
	readOnlyRole.Spec.Level = lockv1alpha1.LevelReadOnly
	auditReadOnly := *readOnly.DeepCopy()
	auditReadOnly.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, "admin-all", errors.New("attempting to grant RBAC permissions not currently held"))
	cases := map[string]struct {
		lock     lockv1alpha1.ClusterLock
		dryRun   bool
		err      error
		labelled bool     // LabelClusterTarget called
		labels   []string // with these; nil: ClusterLockedLabel alone
		allowed  bool
		code     int32
		says     string
	}{
		"Labelled": {lock: clusterLock("keep-prod", "v1", "Namespace", "prod"), labelled: true, allowed: true},
		"ReadOnlyForbidden": {lock: readOnlyRole, err: forbidden, labelled: true, code: 403, labels: []string{lockv1alpha1.ClusterLockedLabel, lockv1alpha1.ReadOnlyLabel},
			says: "run `kubectl label clusterrole admin-all core.navique.com/cluster-locked=true core.navique.com/read-only=true` as someone who may, then create this ClusterLock again"},
		"ReadOnly":      {lock: readOnly, labelled: true, allowed: true, labels: []string{lockv1alpha1.ClusterLockedLabel, lockv1alpha1.ReadOnlyLabel}},
		"AuditReadOnly": {lock: auditReadOnly, labelled: true, allowed: true, labels: []string{lockv1alpha1.ClusterLockedLabel, lockv1alpha1.ReadOnlyLabel}},
		"Missing":       {lock: clusterLock("keep-prod", "v1", "Namespace", "prod"), err: apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "prod"), labelled: true, allowed: true},
		"NotServed":     {lock: clusterLock("keep-r", "core.navique.com/v1alpha1", "Nope", "r"), err: &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "core.navique.com", Kind: "Nope"}}, labelled: true, allowed: true},
		"Namespaced":    {lock: clusterLock("keep-s", "core.navique.com/v1alpha1", "Stack", "s"), err: ErrNamespacedTarget, labelled: true, allowed: true},
		"Invalid":       {lock: clusterLock("pod", "v1", "Pod", "p"), allowed: true},
		"Expired":       {lock: expired, code: 403, says: "spec.expiresAt 2026-12-04T08:59:59Z is not in the future (it is 2026-12-04T09:00:00Z): a Lock that has already expired protects nothing"},
		"ExpiredDryRun": {lock: expired, dryRun: true, code: 403, says: "is not in the future"},
		"DryRun":        {lock: clusterLock("keep-prod", "v1", "Namespace", "prod"), dryRun: true, allowed: true},
		"Forbidden":     {lock: role, err: forbidden, labelled: true, code: 403, says: "lockguard cannot label ClusterRole admin-all without holding every permission it grants; run `kubectl label clusterrole admin-all core.navique.com/cluster-locked=true` as someone who may, then create this ClusterLock again"},
		"Unreachable":   {lock: clusterLock("keep-prod", "v1", "Namespace", "prod"), err: errors.New("connection refused"), labelled: true, code: 503, says: "the ClusterLock was not created because lockguard could not label Namespace prod first; retry"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			called := false
			h := &ClusterLockHandler{c: ClusterLockConfig{Now: func() time.Time { return now },
				Labeler: fakeLabeler{label: func(_ context.Context, key lockv1alpha1.TargetKey, labels []string) error {
					called = true
					want := tc.labels
					if want == nil {
						want = []string{lockv1alpha1.ClusterLockedLabel}
					}
					if !slices.Equal(labels, want) {
						t.Errorf("labels %v; want %v", labels, want)
					}
					if want, _ := tc.lock.Target(); key != want {
						t.Errorf("labelled %+v; want %+v", key, want)
					}
					return tc.err
				}}}}
			raw, _ := json.Marshal(tc.lock)
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Name: tc.lock.Name, DryRun: &tc.dryRun,
				Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "ClusterLock"}, Object: runtime.RawExtension{Raw: raw}}}
			resp := h.DecideCreate(context.Background(), req)
			if called != tc.labelled || resp.Allowed != tc.allowed {
				t.Fatalf("labeller called %t, allowed %t (%+v); want %t, %t", called, resp.Allowed, resp.Result, tc.labelled, tc.allowed)
			}
			if !tc.allowed && (resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.says)) {
				t.Errorf("refusal %d %q; want %d with %q", resp.Result.Code, resp.Result.Message, tc.code, tc.says)
			}
		})
	}
}

// fakeLabeler is a ClusterLabeler of functions; a nil selected lists
// nothing.
type fakeLabeler struct {
	label    func(ctx context.Context, key lockv1alpha1.TargetKey, labels []string) error
	selected func(s *lockv1alpha1.ClusterLockSelector) ([]metav1.PartialObjectMetadata, error)
}

func (f fakeLabeler) LabelClusterTarget(ctx context.Context, key lockv1alpha1.TargetKey, labels []string, _ string) error {
	return f.label(ctx, key, labels)
}

func (f fakeLabeler) ClusterSelected(_ context.Context, s *lockv1alpha1.ClusterLockSelector) ([]metav1.PartialObjectMetadata, error) {
	if f.selected == nil {
		return nil, nil
	}
	return f.selected(s)
}

// clusterSelectorLock is a selector ClusterLock on the Namespaces labelled
// tier=prod.
func clusterSelectorLock(name string) lockv1alpha1.ClusterLock {
	return lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.ClusterLockSpec{
		Selector: &lockv1alpha1.ClusterLockSelector{Kinds: []string{"Namespace"}, MatchLabels: map[string]string{"tier": "prod"}}, Reason: "prod"}}
}

// namespaces is n Namespaces' metadata, as ClusterSelected lists them.
func namespaces(n int) []metav1.PartialObjectMetadata {
	out := make([]metav1.PartialObjectMetadata, n)
	for i := range out {
		out[i].SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"})
		out[i].Name = fmt.Sprintf("ns-%d", i)
	}
	return out
}

// TestClusterLockCreateSelector: a selector ClusterLock's create labels
// every Namespace its selector matches before it is allowed
// (docs/contract.md rule 22); more than MaxClusterSelected refuses it,
// naming the count and the cap; RBAC refusing one label refuses it naming
// that object; a Namespace deleted meanwhile is skipped; a failed list or
// label refuses it retryably; a dry run lists and labels nothing.
func TestClusterLockCreateSelector(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	nsGR := schema.GroupResource{Resource: "namespaces"}
	cases := map[string]struct {
		found    int
		listErr  error
		labelErr func(name string) error
		dryRun   bool
		labelled int
		allowed  bool
		code     int32
		says     string
	}{
		"None":       {allowed: true},
		"All":        {found: 30, labelled: 30, allowed: true},
		"AtCap":      {found: lockv1alpha1.MaxClusterSelected, labelled: lockv1alpha1.MaxClusterSelected, allowed: true},
		"OverCap":    {found: lockv1alpha1.MaxClusterSelected + 1, code: 403, says: "the selector selector:tier=prod;kinds=Namespace matches 1001 objects, more than the 1000 that lockguard labels at a ClusterLock's create"},
		"DryRun":     {found: 3, dryRun: true, allowed: true},
		"Deleted":    {found: 3, labelled: 3, allowed: true, labelErr: func(n string) error { return notFoundIf(n == "ns-1", nsGR, n) }},
		"Forbidden":  {found: 3, labelled: 3, code: 403, says: "lockguard cannot label Namespace ns-2: RBAC does not let it patch it; run `kubectl label namespace ns-2 core.navique.com/cluster-locked=true` as someone who may, then create this ClusterLock again", labelErr: func(n string) error { return forbiddenIf(n == "ns-2", nsGR, n) }},
		"ListFails":  {listErr: errors.New("connection refused"), code: 503, says: "could not list what its selector matches; retry"},
		"LabelFails": {found: 2, labelled: 2, code: 503, says: "could not label what its selector matches first; retry", labelErr: func(string) error { return errors.New("connection refused") }},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			labelled, listed := 0, false
			h := &ClusterLockHandler{c: ClusterLockConfig{Now: func() time.Time { return now },
				Labeler: fakeLabeler{label: func(_ context.Context, key lockv1alpha1.TargetKey, _ []string) error {
					mu.Lock()
					labelled++
					mu.Unlock()
					if key.Kind != "Namespace" || key.Group != "" {
						t.Errorf("labelled %+v", key)
					}
					if tc.labelErr != nil {
						return tc.labelErr(key.Name)
					}
					return nil
				}, selected: func(*lockv1alpha1.ClusterLockSelector) ([]metav1.PartialObjectMetadata, error) {
					listed = true
					return namespaces(tc.found), tc.listErr
				}}}}
			raw, _ := json.Marshal(clusterSelectorLock("keep-prod"))
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Name: "keep-prod", DryRun: &tc.dryRun,
				Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "ClusterLock"}, Object: runtime.RawExtension{Raw: raw}}}
			resp := h.DecideCreate(context.Background(), req)
			if labelled != tc.labelled || resp.Allowed != tc.allowed || listed == tc.dryRun {
				t.Fatalf("listed %t, labelled %d, allowed %t (%+v); want %d, %t", listed, labelled, resp.Allowed, resp.Result, tc.labelled, tc.allowed)
			}
			if !tc.allowed && (resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.says)) {
				t.Errorf("refusal %d %q; want %d with %q", resp.Result.Code, resp.Result.Message, tc.code, tc.says)
			}
		})
	}
}

func notFoundIf(cond bool, gr schema.GroupResource, name string) error {
	if cond {
		return apierrors.NewNotFound(gr, name)
	}
	return nil
}

func forbiddenIf(cond bool, gr schema.GroupResource, name string) error {
	if cond {
		return apierrors.NewForbidden(gr, name, errors.New("no patch"))
	}
	return nil
}
