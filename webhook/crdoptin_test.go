package webhook

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// TestCRDGuardOptedIn (docs/contract.md rules 12 and 21): the CRD of a
// kind of another group that the installation opts in is held back by a
// live Lock on one of its objects, as the group's CRDs are (deleting a CRD
// deletes its objects with no admission of theirs); a CRD of that group
// whose kind is not opted in, and the opted-in CRD once no Lock covers an
// object of it, are allowed.
func TestCRDGuardOptedIn(t *testing.T) {
	gizmo := schema.GroupKind{Group: "example.com", Kind: "Gizmo"}
	before := lockv1alpha1.OptedIn()
	if err := lockv1alpha1.SetOptedIn([]schema.GroupKind{gizmo}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lockv1alpha1.SetOptedIn(before) })
	mapper := guardMapper().(*meta.DefaultRESTMapper)
	mapper.Add(gizmo.WithVersion("v1"), meta.RESTScopeNamespace)
	objects := map[schema.GroupKind]map[string]map[string]bool{gizmo: {"forge": {"g1": true}}}
	lock := *newLock("forge", "keep-g1", "example.com/v1", "Gizmo", "g1")
	const crdDenied = "customresourcedefinition is protected by Lock(s) "
	const crdTail = "; delete the Lock(s) before deleting this CustomResourceDefinition "
	for name, tc := range map[string]struct {
		locks []lockv1alpha1.Lock
		req   Request
		want  result
	}{
		"Locked": {locks: []lockv1alpha1.Lock{lock}, req: crdRequest("example.com", "Gizmo"),
			want: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: crdDenied + "[forge/keep-g1]" + crdTail + "(forge/keep-g1: Gizmo/g1)"}},
		"NoLock":       {req: crdRequest("example.com", "Gizmo"), want: result{Allowed: true, Code: http.StatusOK}},
		"NotOptedIn":   {locks: []lockv1alpha1.Lock{lock}, req: crdRequest("example.com", "Widget"), want: result{Allowed: true, Code: http.StatusOK, Message: "not a core.navique.com CustomResourceDefinition, nor one of an opted-in kind"}},
		"LockOfOthers": {locks: []lockv1alpha1.Lock{lock}, req: crdRequest("example.com", "Lock"), want: result{Allowed: true, Code: http.StatusOK, Message: "not a core.navique.com CustomResourceDefinition, nor one of an opted-in kind"}},
	} {
		t.Run(name, func(t *testing.T) {
			api := &fakeAPI{objects: objects, locks: tc.locks}
			h := NewHandler(Config{Locks: withCache{&countingCache{locks: tc.locks}, noLookup(t)}, Cluster: &ClusterConfig{API: api, Kinds: mapper}})
			if diff := cmp.Diff(tc.want, resultOf(h.Decide(context.Background(), tc.req))); diff != "" {
				t.Errorf("Decide(...): -want, +got:\n%s", diff)
			}
		})
	}
}
