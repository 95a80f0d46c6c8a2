package cachestore

import (
	"fmt"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// isMetaNamespaceIndexFunc reports whether f is toolscache.MetaNamespaceIndexFunc.
func isMetaNamespaceIndexFunc(f toolscache.IndexFunc) bool {
	return reflect.ValueOf(f).Pointer() == reflect.ValueOf(toolscache.IndexFunc(toolscache.MetaNamespaceIndexFunc)).Pointer()
}

// storeName returns the namespace and name obj is stored under, as
// DeletionHandlingMetaNamespaceKeyFunc keys it.
func storeName(obj any) (namespace, name string, err error) {
	switch o := obj.(type) {
	case toolscache.DeletedFinalStateUnknown:
		return splitKey(o.Key)
	case toolscache.ExplicitKey:
		return splitKey(string(o))
	case metav1.Object:
		return o.GetNamespace(), o.GetName(), nil
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", "", toolscache.KeyError{Obj: obj, Err: err}
	}
	return m.GetNamespace(), m.GetName(), nil
}

// storeKey is the key DeletionHandlingMetaNamespaceKeyFunc gives an
// object of namespace and name.
func storeKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// splitKey is toolscache.SplitMetaNamespaceKey without its allocation (a
// Lock's or an owner's lookup on the webhook's path splits one key).
func splitKey(key string) (namespace, name string, err error) {
	namespace, name, found := strings.Cut(key, "/")
	switch {
	case !found:
		return "", key, nil
	case strings.Contains(name, "/"):
		return "", "", fmt.Errorf("unexpected key format: %q", key)
	}
	return namespace, name, nil
}
