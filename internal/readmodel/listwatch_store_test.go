package readmodel

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/cachestore"
)

// TestNewInformerStore: the manager cache's informers, metadata and Lock
// alike, keep their objects in a cachestore.Store.
func TestNewInformerStore(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	for _, obj := range []runtime.Object{&metav1.PartialObjectMetadata{}, &lockv1alpha1.Lock{}} {
		inf := NewInformerFunc(CacheTransform(nil, nil), nil)(src, obj, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
		if _, ok := inf.GetIndexer().(*cachestore.Store); !ok {
			t.Errorf("the informer of %T keeps a %T, not a cachestore.Store", obj, inf.GetIndexer())
		}
	}
}
