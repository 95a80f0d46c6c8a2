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
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestClusterUpdate: under a live ReadOnly ClusterLock (docs/contract.md
// rules 16 and 22), an update of its target's labels or spec is refused
// naming it and the level, dry run alike; the status subresource, an
// exempt principal and lockguard itself, lockguard's own labels added, a
// CanNotDelete, expired or other-target ClusterLock, and a namespaced
// object are allowed; an audit one warns; a cache without an enforcing
// one for a labelled object is confirmed with the API server; unreadable
// ClusterLocks or objects refuse the update.
func TestClusterUpdate(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	frozen := clusterLock("freeze-prod", "v1", "Namespace", "prod")
	frozen.Spec.Level = lockv1alpha1.LevelReadOnly
	keep := clusterLock("keep-prod", "v1", "Namespace", "prod")
	expired := *frozen.DeepCopy()
	expired.Name, expired.Spec.ExpiresAt = "old", &metav1.Time{Time: now.Add(-time.Second)}
	audit := *frozen.DeepCopy()
	audit.Name, audit.Spec.Enforcement = "watch-prod", lockv1alpha1.EnforcementAudit
	other := *frozen.DeepCopy()
	other.Spec.TargetRef.Name = "dev"
	ns := func(labels map[string]string, spec map[string]any) []byte {
		raw, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Namespace",
			"metadata": map[string]any{"name": "prod", "labels": labels}, "spec": spec})
		return raw
	}
	labelled := map[string]string{lockv1alpha1.ClusterLockedLabel: "true", lockv1alpha1.ReadOnlyLabel: "true"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for l, lv := range labelled {
			m[l] = lv
		}
		return m
	}
	team := ns(with("team", "x"), nil)
	locks := func(items ...lockv1alpha1.ClusterLock) *clusterLocksOf { return &clusterLocksOf{items: items} }
	const refused = `Namespace prod is read-only under ClusterLock(s) [freeze-prod (reason: "prod")] (level ReadOnly; the update changes metadata.labels[team]); delete the ClusterLock(s) or set their level to CanNotDelete before changing it (either needs the verb "unlock" on it: the ClusterRole lockguard-cluster-unlock)`
	cases := map[string]struct {
		cache, api  *clusterLocksOf
		user        string
		groups      []string
		kind        string // "": Namespace, reviewed as the API server does (its namespace its name)
		subresource string
		dryRun      bool
		old, obj    []byte
		allowed     bool
		code        int32
		message     string
		warning     string
		apiLists    int
	}{
		"label refused":                         {cache: locks(frozen), api: locks(), obj: team, code: 403, message: refused},
		"dry run refused":                       {cache: locks(frozen), api: locks(), obj: team, dryRun: true, code: 403, message: refused},
		"spec refused":                          {cache: locks(frozen), api: locks(), obj: ns(labelled, map[string]any{"finalizers": []string{"x"}}), code: 403, message: "(level ReadOnly; the update changes spec)"},
		"label removal":                         {cache: locks(frozen), api: locks(), obj: ns(map[string]string{lockv1alpha1.ClusterLockedLabel: "true"}, nil), code: 403, message: "the update changes metadata.labels[" + lockv1alpha1.ReadOnlyLabel + "]"},
		"status":                                {cache: locks(frozen), api: locks(), subresource: "status", obj: team, allowed: true},
		"exempt user":                           {cache: locks(frozen), api: locks(), user: "system:serviceaccount:navique-system:navique-operator", obj: team, allowed: true},
		"exempt group":                          {cache: locks(frozen), api: locks(), groups: []string{"ops"}, obj: team, allowed: true},
		"lockguard itself":                      {cache: locks(frozen), api: locks(), user: "lockguard", obj: ns(nil, nil), allowed: true},
		"has-locks added":                       {cache: locks(frozen), api: locks(), obj: ns(with(lockv1alpha1.HasLocksLabel, "true"), nil), allowed: true},
		"CanNotDelete, expired, another target": {cache: locks(keep, expired, other), api: locks(keep, expired, other), obj: team, allowed: true, apiLists: 1},
		"namespaced":                            {cache: locks(frozen), api: locks(), kind: "ConfigMap", obj: team, allowed: true},
		"audit warns":                           {cache: locks(audit), api: locks(audit), obj: team, allowed: true, warning: "lockguard: would deny: Namespace prod is read-only under ClusterLock(s) [watch-prod", apiLists: 1},
		"cache lags":                            {cache: locks(keep), api: locks(frozen), obj: team, code: 403, message: refused, apiLists: 1},
		"fail closed":                           {cache: &clusterLocksOf{err: errors.New("no cache")}, api: &clusterLocksOf{err: errors.New("no API")}, obj: team, code: 503, message: "lockguard could not read the ClusterLocks of Namespace prod, so the update is refused", apiLists: 1},
		"undecodable":                           {cache: locks(frozen), api: locks(), obj: []byte("{"), code: 400, message: "cannot read the updated Namespace"},
		"subresource":                           {cache: locks(frozen), api: locks(), subresource: "finalize", obj: team, code: 403, message: "(level ReadOnly; the update changes the finalize subresource)"},
		"unlabelled ok":                         {cache: locks(), api: locks(), old: ns(nil, nil), obj: ns(map[string]string{"team": "x"}, nil), allowed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			h := &ClusterLockHandler{c: ClusterLockConfig{Cache: tc.cache, API: tc.api, Now: func() time.Time { return now },
				Self:   func() string { return "lockguard" },
				Exempt: &Exemptions{Users: []string{"system:serviceaccount:navique-system:navique-operator"}, Groups: []string{"ops"}}}, finish: &finisher{}}
			old := tc.old
			if old == nil {
				old = ns(labelled, nil)
			}
			user := tc.user
			if user == "" {
				user = "jane"
			}
			kind := tc.kind
			if kind == "" {
				kind = "Namespace"
			}
			req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update, Name: "prod", Namespace: "prod",
				SubResource: tc.subresource, DryRun: &tc.dryRun, UserInfo: authenticationv1.UserInfo{Username: user, Groups: tc.groups},
				Kind:      metav1.GroupVersionKind{Version: "v1", Kind: kind},
				OldObject: runtime.RawExtension{Raw: old}, Object: runtime.RawExtension{Raw: tc.obj}}}
			resp := h.DecideUpdate(context.Background(), req)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v (%+v); want %v", resp.Allowed, resp.Result, tc.allowed)
			}
			if !tc.allowed && (resp.Result.Code != tc.code || !strings.Contains(resp.Result.Message, tc.message)) {
				t.Errorf("refused %d %q; want %d with %q", resp.Result.Code, resp.Result.Message, tc.code, tc.message)
			}
			if tc.warning != "" && (len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], tc.warning)) {
				t.Errorf("warnings %q; want %q", resp.Warnings, tc.warning)
			}
			if tc.api.lists != tc.apiLists {
				t.Errorf("%d API lists; want %d", tc.api.lists, tc.apiLists)
			}
		})
	}
}

// TestClusterUnlockLevel (rules 18 and 22): lowering a ClusterLock's level
// from ReadOnly reaches the unlock entry from a principal without unlock
// and is refused, naming the level; raising it is allowed.
func TestClusterUnlockLevel(t *testing.T) {
	cl := func(level lockv1alpha1.LockLevel) runtime.RawExtension {
		c := clusterLock("freeze-prod", "v1", "Namespace", "prod")
		c.Spec.Level = level
		raw, _ := json.Marshal(c)
		return runtime.RawExtension{Raw: raw}
	}
	for _, tc := range []struct {
		from, to lockv1alpha1.LockLevel
		allowed  bool
	}{{lockv1alpha1.LevelReadOnly, lockv1alpha1.LevelCanNotDelete, false}, {lockv1alpha1.LevelReadOnly, "", false}, {lockv1alpha1.LevelCanNotDelete, lockv1alpha1.LevelReadOnly, true}} {
		resp := NewUnlockHandler(nil).Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Kind: metav1.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "ClusterLock"}, Operation: admissionv1.Update,
			Name: "freeze-prod", OldObject: cl(tc.from), Object: cl(tc.to)}})
		if resp.Allowed != tc.allowed {
			t.Errorf("%s to %q: allowed %v; want %v", tc.from, tc.to, resp.Allowed, tc.allowed)
		}
		if want := lockv1alpha1.ClusterUnlockMessage("lowering the level of", "freeze-prod"); !tc.allowed && resp.Result.Message != want {
			t.Errorf("%s to %q: %q; want %q", tc.from, tc.to, resp.Result.Message, want)
		}
	}
}
