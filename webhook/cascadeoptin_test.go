package webhook

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// builtIn is an object of forge of a kind outside the group (gk), UID
// "uid-<name>", owned by owners (apiVersion, Kind, name: UID
// "uid-<name>").
func builtIn(gk schema.GroupKind, name string, owners ...metav1.OwnerReference) graphObject {
	o := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: name, UID: types.UID("uid-" + name)}}
	for _, ref := range owners {
		ref.UID = types.UID("uid-" + ref.Name)
		o.OwnerReferences = append(o.OwnerReferences, ref)
	}
	return graphObject{gk: gk, meta: o}
}

// TestCascadeOptedInKinds (docs/contract.md rules 6 and 21): opted-in
// kinds are walked as the group's are, as owners and as dependents, over
// the owner graph and, before it has synced, over the API server's lists
// of the kinds it holds (CascadeConfig.Kinds, which lists the opted-in
// kinds beside the group's): the delete of a StatefulSet owning a locked
// PVC, and of a Stack owning that StatefulSet, is refused naming the PVC;
// an Orphan delete is allowed with a warning.
func TestCascadeOptedInKinds(t *testing.T) {
	sts := schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	pvc := schema.GroupKind{Kind: "PersistentVolumeClaim"}
	before := lockv1alpha1.OptedIn()
	if err := lockv1alpha1.SetOptedIn([]schema.GroupKind{pvc, sts}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lockv1alpha1.SetOptedIn(before); err != nil {
			t.Error(err)
		}
	})
	objects := []graphObject{
		builtIn(sts, "db", metav1.OwnerReference{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "root"}),
		builtIn(pvc, "data-db-0", metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"}),
		obj("Stack", "root"),
	}
	kinds := func() ([]schema.GroupVersionKind, error) {
		return []schema.GroupVersionKind{
			{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
			{Group: "apps", Version: "v1", Kind: "StatefulSet"},
			{Version: "v1", Kind: "PersistentVolumeClaim"},
		}, nil
	}
	denied := result{Code: 403, Reason: metav1.StatusReasonForbidden, Message: CascadeDenialMessage(
		[]lockv1alpha1.Lock{*newLock("forge", "keep-data-db-0", "", "PersistentVolumeClaim", "data-db-0")}, []string{"PersistentVolumeClaim/data-db-0"})}
	setDelete := func(policy metav1.DeletionPropagation) Request {
		r := request(admissionv1.Delete, "apps", "StatefulSet", "forge", "db", "db")
		r.Kind.Version = "v1"
		r.OldObject.Metadata.UID = "uid-db"
		if policy != "" {
			r.Options.PropagationPolicy = &policy
		}
		return r
	}
	graphs := map[string]OwnerGraph{
		"Synced":   &fakeGraph{objects: objects},
		"Unsynced": &fakeGraph{err: errors.New("the metadata cache of StatefulSet.apps has not synced yet")},
	}
	for name, graph := range graphs {
		t.Run(name, func(t *testing.T) {
			api := &objectsAPI{objects: objects}
			h := NewHandler(Config{Locks: locksOn("data-db-0"), Cascade: CascadeConfig{Graph: graph, Mode: CascadeDeny, API: api, Kinds: kinds}})
			for _, req := range []Request{setDelete(""), setDelete(metav1.DeletePropagationForeground), ownerDelete("")} {
				if diff := cmp.Diff(denied, resultOf(h.Decide(context.Background(), req))); diff != "" {
					t.Errorf("Decide(DELETE %s %s, %v): -want, +got:\n%s", req.Kind.Kind, req.Name, req.Options.PropagationPolicy, diff)
				}
			}
			resp := h.Decide(context.Background(), setDelete(metav1.DeletePropagationOrphan))
			if got := resultOf(resp); !got.Allowed || len(resp.Warnings) != 1 {
				t.Errorf("Decide(Orphan DELETE StatefulSet db): %+v, warnings %q; want allowed with a warning", got, resp.Warnings)
			}
			if listed := len(api.lists) > 0; listed != (name == "Unsynced") {
				t.Errorf("the API server listed %q; want lists only while the graph cannot answer", api.lists)
			}
		})
	}
}
