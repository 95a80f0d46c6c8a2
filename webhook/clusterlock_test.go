package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// clusterLocksOf is a LockLister of ClusterLocks (err: every list fails).
type clusterLocksOf struct {
	items []lockv1alpha1.ClusterLock
	err   error
	lists int
}

func (c *clusterLocksOf) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	c.lists++
	if c.err != nil {
		return c.err
	}
	list.(*lockv1alpha1.ClusterLockList).Items = c.items
	return nil
}

func clusterLock(name, apiVersion, kind, target string) lockv1alpha1.ClusterLock {
	return lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: lockv1alpha1.ClusterLockSpec{
		TargetRef: lockv1alpha1.ClusterTargetReference{APIVersion: apiVersion, Kind: kind, Name: target}, Reason: "prod"}}
}

// TestClusterLockDelete: the DELETE of an object a live ClusterLock names
// or selects (docs/contract.md rule 22) is refused naming it, its reason
// and the unlock role; an expired, audit
// or other-target ClusterLock refuses nothing (audit warns); what the
// cache would allow is confirmed with the API server; when neither can
// be read, the delete is refused (fail closed).
func TestClusterLockDelete(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	nsLock := clusterLock("keep-prod", "v1", "Namespace", "prod")
	expired := clusterLock("old", "v1", "Namespace", "prod")
	expired.Spec.ExpiresAt = &metav1.Time{Time: now.Add(-time.Second)}
	audit := clusterLock("watch-prod", "v1", "Namespace", "prod")
	audit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	other := clusterLock("keep-crd", "apiextensions.k8s.io/v1", "CustomResourceDefinition", "prod")
	del := func(group, kind, name string) Request {
		ns := ""
		if kind == "Namespace" {
			ns = name // as the API server sends a Namespace's review
		}
		return request(admissionv1.Delete, group, kind, ns, name, name)
	}
	delLabelled := func(group, kind, name string, labels map[string]string) Request {
		r := del(group, kind, name)
		r.OldObject.Metadata.Labels = labels
		return r
	}
	tierProd := clusterSelectorLock("keep-tier-prod")
	tierAudit := clusterSelectorLock("keep-tier-prod")
	tierAudit.Spec.Enforcement = lockv1alpha1.EnforcementAudit
	cases := map[string]struct {
		cache, api *clusterLocksOf
		req        Request
		allowed    bool
		code       int32
		message    string
		warning    string
		apiLists   int
	}{
		"denied from the cache": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{nsLock}}, api: &clusterLocksOf{}, req: del("", "Namespace", "prod"),
			code: 403, message: `Namespace prod is protected by ClusterLock(s) [keep-prod (reason: "prod")]; delete the ClusterLock(s) before deleting it (deleting a ClusterLock needs the verb "unlock" on it: the ClusterRole lockguard-cluster-unlock)`},
		"denied from the API server when the cache lags": {cache: &clusterLocksOf{}, api: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{nsLock}}, req: del("", "Namespace", "prod"),
			code: 403, message: "Namespace prod is protected by ClusterLock(s) [keep-prod", apiLists: 1},
		"allowed: expired, another target": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{expired, other}}, api: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{expired, other}}, req: del("", "Namespace", "prod"),
			allowed: true, apiLists: 1},
		"audit warns": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{audit}}, api: &clusterLocksOf{}, req: del("", "Namespace", "prod"),
			allowed: true, warning: "lockguard: would deny: Namespace prod is protected by ClusterLock(s) [watch-prod"},
		"the CRD": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{nsLock, other}}, api: &clusterLocksOf{}, req: del("apiextensions.k8s.io", "CustomResourceDefinition", "prod"),
			code: 403, message: "CustomResourceDefinition prod is protected by ClusterLock(s) [keep-crd"},
		"selector: labels match": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{tierProd}}, api: &clusterLocksOf{}, req: delLabelled("", "Namespace", "prod", map[string]string{"tier": "prod"}),
			code: 403, message: `Namespace prod is protected by ClusterLock(s) [keep-tier-prod (reason: "prod")]; delete the ClusterLock(s)`},
		"selector: confirmed with the API server": {cache: &clusterLocksOf{}, api: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{tierProd}}, req: delLabelled("", "Namespace", "prod", map[string]string{"tier": "prod"}),
			code: 403, message: "Namespace prod is protected by ClusterLock(s) [keep-tier-prod", apiLists: 1},
		"selector: labels do not match": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{tierProd}}, api: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{tierProd}},
			req: delLabelled("", "Namespace", "prod", map[string]string{"tier": "dev"}), allowed: true, apiLists: 1},
		"selector: another kind": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{tierProd}}, api: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{tierProd}},
			req: delLabelled("rbac.authorization.k8s.io", "ClusterRole", "prod", map[string]string{"tier": "prod"}), allowed: true, apiLists: 1},
		"selector: audit warns": {cache: &clusterLocksOf{items: []lockv1alpha1.ClusterLock{tierAudit}}, api: &clusterLocksOf{}, req: delLabelled("", "Namespace", "prod", map[string]string{"tier": "prod"}),
			allowed: true, warning: "lockguard: would deny: Namespace prod is protected by ClusterLock(s) [keep-tier-prod"},
		"fail closed": {cache: &clusterLocksOf{err: errors.New("no cache")}, api: &clusterLocksOf{err: errors.New("no API")}, req: del("", "Namespace", "prod"),
			code: 503, message: "lockguard could not read the ClusterLocks of Namespace prod", apiLists: 1},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			m := NewMetrics()
			h := NewClusterLockHandler(NewHandler(Config{Metrics: m}), ClusterLockConfig{Cache: c.cache, API: c.api, Now: func() time.Time { return now }})
			resp := h.DecideDelete(context.Background(), c.req)
			if resp.Allowed != c.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, c.allowed, resp.Result)
			}
			if !c.allowed && (resp.Result.Code != c.code || !strings.Contains(resp.Result.Message, c.message)) {
				t.Errorf("refusal %d %q; want %d with %q", resp.Result.Code, resp.Result.Message, c.code, c.message)
			}
			if c.warning != "" && (len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], c.warning)) {
				t.Errorf("warnings %q; want %q...", resp.Warnings, c.warning)
			}
			if c.api.lists != c.apiLists {
				t.Errorf("%d lists from the API server, want %d", c.api.lists, c.apiLists)
			}
		})
	}
}

// TestClusterLockLabel: removing or changing ClusterLockedLabel on an
// object a live ClusterLock names or selects is refused, except by
// lockguard; adding it, keeping it, or removing it from an object no
// ClusterLock covers (once the update applies: one that relabels it out
// of a selector too) is allowed.
func TestClusterLockLabel(t *testing.T) {
	obj := func(labels map[string]string) runtime.RawExtension {
		raw, _ := json.Marshal(map[string]any{"metadata": map[string]any{"name": "prod", "labels": labels}})
		return runtime.RawExtension{Raw: raw}
	}
	locked := map[string]string{lockv1alpha1.ClusterLockedLabel: "true"}
	update := func(user string, old, next map[string]string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Name: "prod",
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, UserInfo: authenticationv1.UserInfo{Username: user},
			OldObject: obj(old), Object: obj(next)}}
	}
	cases := map[string]struct {
		locks   []lockv1alpha1.ClusterLock
		req     admission.Request
		allowed bool
	}{
		"removed":                 {[]lockv1alpha1.ClusterLock{clusterLock("keep-prod", "v1", "Namespace", "prod")}, update("alice", locked, nil), false},
		"changed":                 {[]lockv1alpha1.ClusterLock{clusterLock("keep-prod", "v1", "Namespace", "prod")}, update("alice", locked, map[string]string{lockv1alpha1.ClusterLockedLabel: "no"}), false},
		"kept, other label added": {[]lockv1alpha1.ClusterLock{clusterLock("keep-prod", "v1", "Namespace", "prod")}, update("alice", locked, map[string]string{lockv1alpha1.ClusterLockedLabel: "true", "team": "a"}), true},
		"by lockguard":            {[]lockv1alpha1.ClusterLock{clusterLock("keep-prod", "v1", "Namespace", "prod")}, update("lockguard", locked, nil), true},
		"no ClusterLock":          {nil, update("alice", locked, nil), true},
		"added":                   {nil, update("alice", nil, locked), true},
		"selected: removed":       {[]lockv1alpha1.ClusterLock{clusterSelectorLock("keep-prod")}, update("alice", map[string]string{lockv1alpha1.ClusterLockedLabel: "true", "tier": "prod"}, map[string]string{"tier": "prod"}), false},
		"selected: relabelled out and removed at once": {[]lockv1alpha1.ClusterLock{clusterSelectorLock("keep-prod")},
			update("alice", map[string]string{lockv1alpha1.ClusterLockedLabel: "true", "tier": "prod"}, map[string]string{"tier": "dev"}), true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cache := &clusterLocksOf{items: c.locks}
			h := NewClusterLockHandler(NewHandler(Config{}), ClusterLockConfig{Cache: cache, API: cache, Self: func() string { return "lockguard" }})
			resp := h.DecideLabel(context.Background(), c.req)
			if resp.Allowed != c.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, c.allowed, resp.Result)
			}
			if want := "the label core.navique.com/cluster-locked=true on Namespace prod is kept by lockguard while ClusterLock(s) [keep-prod"; !c.allowed && !strings.HasPrefix(resp.Result.Message, want) {
				t.Errorf("refusal %q; want %q...", resp.Result.Message, want)
			}
		})
	}
}

// TestUnlockHandlerClusterLock: what reaches UnlockPath for a ClusterLock
// comes from a principal without unlock on it: its delete is refused
// naming the verb and lockguard-cluster-unlock, an update only when it
// lowers the ClusterLock.
func TestUnlockHandlerClusterLock(t *testing.T) {
	raw := func(enforcement lockv1alpha1.Enforcement) runtime.RawExtension {
		b, _ := json.Marshal(&lockv1alpha1.ClusterLock{ObjectMeta: metav1.ObjectMeta{Name: "keep-prod"}, Spec: lockv1alpha1.ClusterLockSpec{Enforcement: enforcement}})
		return runtime.RawExtension{Raw: b}
	}
	u := NewUnlockHandler(nil)
	req := func(op admissionv1.Operation, old, next lockv1alpha1.Enforcement) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op,
			Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "ClusterLock"}, OldObject: raw(old), Object: raw(next)}}
	}
	if resp := u.Handle(context.Background(), req(admissionv1.Delete, "", "")); resp.Allowed ||
		resp.Result.Message != `deleting ClusterLock keep-prod needs the verb "unlock" on clusterlocks.core.navique.com (RBAC); ask for the ClusterRole lockguard-cluster-unlock` {
		t.Errorf("delete: %+v", resp.Result)
	}
	if resp := u.Handle(context.Background(), req(admissionv1.Update, lockv1alpha1.EnforcementEnforce, lockv1alpha1.EnforcementAudit)); resp.Allowed ||
		!strings.HasPrefix(resp.Result.Message, "lowering the enforcement of ClusterLock keep-prod needs the verb") {
		t.Errorf("lowering update: %+v", resp.Result)
	}
	if resp := u.Handle(context.Background(), req(admissionv1.Update, lockv1alpha1.EnforcementAudit, lockv1alpha1.EnforcementEnforce)); !resp.Allowed {
		t.Errorf("raising update refused: %+v", resp.Result)
	}
}
