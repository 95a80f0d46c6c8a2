package readmodel

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/navique/lockguard/internal/cachestore"
)

// The metav1.Object methods of CachedLock, which the cache's key and
// namespace index functions and a cached client's List read.

// GetNamespace returns the namespace.
func (c *CachedLock) GetNamespace() string { return c.namespace }

// SetNamespace sets the namespace.
func (c *CachedLock) SetNamespace(namespace string) { c.namespace = namespace }

// GetName returns the name.
func (c *CachedLock) GetName() string { return c.name }

// SetName sets the name.
func (c *CachedLock) SetName(name string) { c.name = name }

// GetGenerateName returns the generateName.
func (c *CachedLock) GetGenerateName() string {
	if c.rare == nil {
		return ""
	}
	return c.rare.generateName
}

// SetGenerateName sets the generateName.
func (c *CachedLock) SetGenerateName(name string) {
	if name != "" || c.rare != nil {
		c.more().generateName = name
	}
}

// GetUID returns the UID.
func (c *CachedLock) GetUID() types.UID {
	return c.getUID(c.odd())
}

// hasUID reports whether c's UID is uid, formatting none.
func (c *CachedLock) hasUID(uid types.UID) bool {
	if b, ok := cachestore.ParseUUID(string(uid)); ok {
		return b == c.uid
	}
	return c.uid == ([16]byte{}) && c.GetUID() == uid
}

// GetResourceVersion returns the resourceVersion.
func (c *CachedLock) GetResourceVersion() string {
	return c.getRV(c.odd())
}

// SetUID sets the UID.
func (c *CachedLock) SetUID(uid types.UID) {
	c.setUID(uid, c.odd(), func() *oddIDs { return &c.more().oddIDs })
}

// SetResourceVersion sets the resourceVersion.
func (c *CachedLock) SetResourceVersion(version string) {
	c.setRV(version, c.odd(), func() *oddIDs { return &c.more().oddIDs })
}

// GetGeneration returns the generation.
func (c *CachedLock) GetGeneration() int64 { return c.generation }

// SetGeneration sets the generation.
func (c *CachedLock) SetGeneration(generation int64) { c.generation = generation }

// GetSelfLink returns the selfLink.
func (c *CachedLock) GetSelfLink() string {
	if c.rare == nil {
		return ""
	}
	return c.rare.selfLink
}

// SetSelfLink sets the selfLink.
func (c *CachedLock) SetSelfLink(selfLink string) {
	if selfLink != "" || c.rare != nil {
		c.more().selfLink = selfLink
	}
}

// GetCreationTimestamp returns the creationTimestamp.
func (c *CachedLock) GetCreationTimestamp() metav1.Time {
	if c.flags&flagCreatedRare != 0 {
		return c.rare.created
	}
	return unpackTime(c.created)
}

// SetCreationTimestamp sets the creationTimestamp.
func (c *CachedLock) SetCreationTimestamp(t metav1.Time) {
	if n, ok := packTime(t); ok {
		c.created, c.flags = n, c.flags&^flagCreatedRare
		if c.rare != nil {
			c.rare.created = metav1.Time{}
		}
		return
	}
	c.created, c.flags = 0, c.flags|flagCreatedRare
	c.more().created = t
}

// GetDeletionTimestamp returns the deletionTimestamp (the cache's:
// read-only).
func (c *CachedLock) GetDeletionTimestamp() *metav1.Time {
	if c.rare == nil {
		return nil
	}
	return c.rare.deletionTimestamp
}

// SetDeletionTimestamp sets the deletionTimestamp.
func (c *CachedLock) SetDeletionTimestamp(t *metav1.Time) {
	if t != nil || c.rare != nil {
		c.more().deletionTimestamp = t
	}
}

// GetDeletionGracePeriodSeconds returns the deletionGracePeriodSeconds
// (the cache's: read-only).
func (c *CachedLock) GetDeletionGracePeriodSeconds() *int64 {
	if c.rare == nil {
		return nil
	}
	return c.rare.deletionGracePeriodSeconds
}

// SetDeletionGracePeriodSeconds sets the deletionGracePeriodSeconds.
func (c *CachedLock) SetDeletionGracePeriodSeconds(s *int64) {
	if s != nil || c.rare != nil {
		c.more().deletionGracePeriodSeconds = s
	}
}

// GetLabels returns nil: not kept (trimLock).
func (c *CachedLock) GetLabels() map[string]string { return nil }

// SetLabels does nothing: not kept.
func (c *CachedLock) SetLabels(map[string]string) {}

// GetAnnotations returns nil: not kept (trimLock).
func (c *CachedLock) GetAnnotations() map[string]string { return nil }

// SetAnnotations does nothing: not kept.
func (c *CachedLock) SetAnnotations(map[string]string) {}

// GetFinalizers returns nil: not kept (trimLock).
func (c *CachedLock) GetFinalizers() []string { return nil }

// SetFinalizers does nothing: not kept.
func (c *CachedLock) SetFinalizers([]string) {}

// GetOwnerReferences returns nil: not kept (trimLock).
func (c *CachedLock) GetOwnerReferences() []metav1.OwnerReference { return nil }

// SetOwnerReferences does nothing: not kept.
func (c *CachedLock) SetOwnerReferences([]metav1.OwnerReference) {}

// GetManagedFields returns nil: not kept (trimLock).
func (c *CachedLock) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }

// SetManagedFields does nothing: not kept.
func (c *CachedLock) SetManagedFields([]metav1.ManagedFieldsEntry) {}

// odd returns the odd UID and resourceVersion of c's rare part, nil when
// c has none.
func (c *CachedLock) odd() *oddIDs {
	if c.rare == nil {
		return nil
	}
	return &c.rare.oddIDs
}
