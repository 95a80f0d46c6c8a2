package cachestore

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// RefreshNamespace stores again, transformed anew, the objects the store
// holds in namespace ns, so that what the transform keeps of them follows
// a change of the transform's own (lockguard's readmodel.LabelKeys: a
// label key that a new selector Lock reads). It lists the namespace from
// the API server (a page at a time, resourceVersion unset: consistent,
// begun after the change) and, for each object that the store holds at
// the UID and resourceVersion listed, stores the listed object
// transformed, telling the handlers of an update (from the stored object
// to the new one). It needs no set of names and deletes nothing: an
// object stored at another version, or not stored, or stored and not
// listed, has a watch event coming after the list began, transformed
// after the change (apply transforms under deliver, as this does).
//
// It returns nil at once when the store holds no object of ns (the
// objects of ns that come later are transformed after the change; a
// cluster-scoped kind never holds one), or when the informer has not run
// yet (its first list comes after the change) or has stopped.
func (i *Informer) RefreshNamespace(ns string) error {
	ctxp := i.runCtx.Load()
	if ctxp == nil || i.stopped.Load() || !i.store.holdsNamespace(ns) {
		return nil
	}
	ctx := *ctxp
	i.mu.Lock()
	transform := i.transform
	i.mu.Unlock()
	opts := metav1.ListOptions{Limit: i.pageSize, FieldSelector: fields.OneTermEqualSelector("metadata.namespace", ns).String()}
	_, err := i.eachListed(ctx, opts, func(obj runtime.Object) error { return i.restore(obj, transform) })
	switch {
	case ctx.Err() != nil:
		return nil
	case err != nil:
		return fmt.Errorf("listing namespace %s again: %w", ns, err)
	}
	return nil
}

// restore stores obj, listed by RefreshNamespace, transformed, when the
// store holds it at its UID and resourceVersion.
func (i *Informer) restore(obj runtime.Object, transform func(any) (any, error)) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return fmt.Errorf("a listed %T: %w", obj, err)
	}
	i.deliver.Lock()
	defer i.deliver.Unlock()
	stored, ok, err := i.store.get(m.GetNamespace(), m.GetName())
	if err != nil || !ok {
		return err
	}
	s := stored.(metav1.Object)
	if s.GetUID() != m.GetUID() || s.GetResourceVersion() != m.GetResourceVersion() {
		return nil
	}
	o, err := i.transformedMeta(obj, transform)
	if err != nil {
		return err
	}
	return i.store.put(o, false, false)
}

// holdsNamespace reports whether s holds an object of namespace ns.
func (s *Store) holdsNamespace(ns string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	t := s.objects[ns]
	return t != nil && t.n > 0
}
