package readmodel

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// metadataInformers are a cache's metadata informers, by the kind of the
// object asked for; it has no other.
type metadataInformers map[schema.GroupVersionKind]toolscache.SharedIndexInformer

// GetInformer returns the informer of obj's kind.
func (m metadataInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	inf, ok := m[obj.GetObjectKind().GroupVersionKind()]
	if !ok {
		return nil, fmt.Errorf("no informer of %s", obj.GetObjectKind().GroupVersionKind())
	}
	return inf, nil
}

func (m metadataInformers) GetInformerForKind(context.Context, schema.GroupVersionKind, ...cache.InformerGetOption) (cache.Informer, error) {
	return nil, errors.New("not in this test")
}
func (m metadataInformers) RemoveInformer(context.Context, client.Object) error { return nil }
func (m metadataInformers) Start(context.Context) error                         { return nil }
func (m metadataInformers) WaitForCacheSync(context.Context) bool               { return true }
func (m metadataInformers) IndexField(context.Context, client.Object, string, client.IndexerFunc) error {
	return errors.New("not in this test")
}

// TestDiscoveryIndexesTheGroupOnEveryReplica: discovery runs without
// leadership (every replica's webhook walks cascades over its own owner
// index), and adds each namespaced, watchable kind of the group to the
// owner index, once, and nothing else (fakeGroup: Stack, not the
// cluster-scoped Region nor another group's kind).
func TestDiscoveryIndexesTheGroupOnEveryReplica(t *testing.T) {
	stacks := schema.GroupVersionKind{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"}
	informers := metadataInformers{stacks: toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})}
	owners := NewOwnerIndex(informers, nil)
	d := NewDiscovery(NewKinds(fakeGroup()), owners, 0)
	if d.NeedLeaderElection() {
		t.Error("NeedLeaderElection() = true, want false: every replica's webhook reads the owner index")
	}
	if owners.HasSynced() {
		t.Error("HasSynced() before discovery ran")
	}
	d.discover(context.Background())
	d.discover(context.Background())
	want := []schema.GroupKind{{Group: "core.navique.com", Kind: "Stack"}}
	if diff := cmp.Diff(want, owners.order); diff != "" {
		t.Errorf("kinds in the owner index: -want, +got:\n%s", diff)
	}
	if !owners.discovered {
		t.Error("discovery ran, but the owner index does not know it")
	}
}

// TestDiscoveryIndexesOptedInKinds (docs/contract.md rules 6 and 21): an
// opted-in kind of another group (StatefulSet) joins the owner index
// beside the group's, so that the cascade guard walks it as an owner and
// as a dependent; a kind of that group not opted in (Deployment) does
// not.
func TestDiscoveryIndexesOptedInKinds(t *testing.T) {
	sts := schema.GroupKind{Group: "apps", Kind: "StatefulSet"}
	before := lockv1alpha1.OptedIn()
	if err := lockv1alpha1.SetOptedIn([]schema.GroupKind{sts}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lockv1alpha1.SetOptedIn(before); err != nil {
			t.Error(err)
		}
	})
	d := fakeGroup()
	verbs := metav1.Verbs{"get", "list", "watch", "patch", "delete"}
	d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
		{Name: "statefulsets", SingularName: "statefulset", Namespaced: true, Kind: "StatefulSet", Verbs: verbs},
		{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment", Verbs: verbs},
	}})
	newInformer := func() toolscache.SharedIndexInformer {
		return toolscache.NewSharedIndexInformer(&toolscache.ListWatch{}, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
	}
	informers := metadataInformers{
		{Group: "core.navique.com", Version: "v1alpha1", Kind: "Stack"}: newInformer(),
		sts.WithVersion("v1"): newInformer(),
	}
	owners := NewOwnerIndex(informers, nil)
	NewDiscovery(NewKinds(d).WithOptIn([]schema.GroupResource{{Group: "apps", Resource: "statefulsets"}}), owners, 0).discover(context.Background())
	want := []schema.GroupKind{{Group: "core.navique.com", Kind: "Stack"}, sts}
	if diff := cmp.Diff(want, owners.order); diff != "" {
		t.Errorf("kinds in the owner index: -want, +got:\n%s", diff)
	}
	if !owners.discovered {
		t.Error("discovery ran, but the owner index does not know it")
	}
}
