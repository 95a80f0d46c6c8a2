package manager

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/navique/lockguard/webhook"
)

// apiParents reads the kind and labels of the object that an UPDATE of
// one of its subresources writes (webhook.Parents): the kind from the
// REST mapper, the labels with a metadata GET from the API server, not a
// cache, so that the update guard sees the labels the object has now
// (docs/contract.md rule 16).
type apiParents struct {
	mapper meta.RESTMapper
	reader client.Reader
}

var _ webhook.Parents = apiParents{}

// Parent reads the object name of resource gvr in namespace ns.
func (p apiParents) Parent(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (string, map[string]string, error) {
	gvk, err := p.mapper.KindFor(gvr)
	if err != nil {
		return "", nil, fmt.Errorf("finding the kind of %s: %w", gvr.GroupResource(), err)
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk)
	if err := p.reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		return "", nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, ns, name, err)
	}
	return gvk.Kind, obj.Labels, nil
}
