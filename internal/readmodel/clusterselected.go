package readmodel

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// ClusterSelected lists, from r (the API server), the metadata of the
// objects that the selector s of a ClusterLock matches now
// (docs/contract.md rule 22): of each of its kinds that mapper serves for
// cluster-scoped objects, those whose labels match. Each carries its
// GroupVersionKind. A kind not served, or namespaced, has none (the
// ClusterLock's status says why). This is the one reading of a selector
// ClusterLock's objects: its create's admission labels them, the
// reconciler keeps their label and counts them in status.protected.
func ClusterSelected(ctx context.Context, r client.Reader, mapper meta.RESTMapper, s *lockv1alpha1.ClusterLockSelector) ([]metav1.PartialObjectMetadata, error) {
	sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector())
	if err != nil {
		return nil, fmt.Errorf("selector is not a valid label selector: %w", err)
	}
	var out []metav1.PartialObjectMetadata
	for _, gk := range s.GroupKinds() {
		mapping, err := mapper.RESTMapping(gk)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("mapping kind %s: %w", gk, err)
		}
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace || lockv1alpha1.ClusterProtectable(gk) != nil {
			continue
		}
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(mapping.GroupVersionKind.GroupVersion().WithKind(mapping.GroupVersionKind.Kind + "List"))
		if err := r.List(ctx, list, client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing the %s that the selector %s matches: %w", gk, s, err)
		}
		for i := range list.Items {
			list.Items[i].SetGroupVersionKind(mapping.GroupVersionKind)
			out = append(out, list.Items[i])
		}
	}
	return out, nil
}
