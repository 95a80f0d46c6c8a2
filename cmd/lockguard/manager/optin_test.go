package manager

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// TestOptedInKind: an opted-in kind resolves to its served version; a
// kind not opted in and a core.navique.com kind do not; and when
// discovery fails, an opted-in kind is an error (the Lock create is then
// refused, retryably, not allowed unlabelled) while a kind not opted in
// is still not opted in.
func TestOptedInKind(t *testing.T) {
	pvc := schema.GroupKind{Kind: "PersistentVolumeClaim"}
	if err := lockv1alpha1.SetOptedIn([]schema.GroupKind{pvc}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lockv1alpha1.SetOptedIn(nil) })
	verbs := metav1.Verbs{"get", "list", "watch", "patch", "delete"}
	disco := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "persistentvolumeclaims", SingularName: "persistentvolumeclaim", Namespaced: true, Kind: "PersistentVolumeClaim", Verbs: verbs},
			{Name: "configmaps", SingularName: "configmap", Namespaced: true, Kind: "ConfigMap", Verbs: verbs}}},
	}}}
	resolve := optedInKind(readmodel.NewKinds(disco).WithOptIn([]schema.GroupResource{{Resource: "persistentvolumeclaims"}}))
	if gvk, ok, err := resolve(pvc); err != nil || !ok || gvk != (schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}) {
		t.Errorf("PersistentVolumeClaim: %v %v %v; want v1 PersistentVolumeClaim, true, nil", gvk, ok, err)
	}
	for _, gk := range []schema.GroupKind{{Kind: "ConfigMap"}, {Group: lockv1alpha1.Group, Kind: "Stack"}} {
		if _, ok, err := resolve(gk); ok || err != nil {
			t.Errorf("%s: %v %v; want false, nil", gk, ok, err)
		}
	}

	down := errors.New("discovery is down")
	failing := &downDiscovery{FakeDiscovery: &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}, err: down}
	resolve = optedInKind(readmodel.NewKinds(failing).WithOptIn([]schema.GroupResource{{Resource: "persistentvolumeclaims"}}))
	if _, ok, err := resolve(pvc); ok || err == nil {
		t.Errorf("PersistentVolumeClaim with discovery down: %v %v; want an error", ok, err)
	}
	if _, ok, err := resolve(schema.GroupKind{Kind: "ConfigMap"}); ok || err != nil {
		t.Errorf("ConfigMap with discovery down: %v %v; want false, nil", ok, err)
	}
}

// downDiscovery is a discovery client whose group list fails.
type downDiscovery struct {
	*fakediscovery.FakeDiscovery
	err error
}

func (d *downDiscovery) ServerGroups() (*metav1.APIGroupList, error) { return nil, d.err }
