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
	owners := NewOwnerIndex(informers)
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
