package cachestore

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// clientGoInformer is the type of client-go's SharedIndexInformer.
var clientGoInformer = reflect.TypeOf(toolscache.NewSharedIndexInformer(nil, nil, 0, nil))

// Install makes store the store of inf, a SharedIndexInformer that
// toolscache.NewSharedIndexInformer made and that has not run, and
// reports whether it could: false (inf unchanged) when inf is not
// client-go's informer or client-go's informer no longer keeps its store
// in an Indexer field named indexer (TestInstall fails then).
//
// client-go offers no way to give its informer another store, and its
// informer is what the manager's cache, the controller's sources and
// every handler are built on (their events, resyncs, relists and
// tombstones stay client-go's); its store is what costs (Store).
// The field is set before the informer runs, while nothing else has
// read it.
func Install(inf toolscache.SharedIndexInformer, store toolscache.Indexer) bool {
	v := reflect.ValueOf(inf)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return false
	}
	if v.Type() != clientGoInformer {
		return false
	}
	f := v.Elem().FieldByName("indexer")
	if !f.IsValid() || f.Type() != reflect.TypeFor[toolscache.Indexer]() {
		return false
	}
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Set(reflect.ValueOf(store))
	return inf.GetIndexer() == store
}

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
