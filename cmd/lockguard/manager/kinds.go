package manager

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/navique/lockguard/internal/readmodel"
)

// servedKinds lists the namespaced kinds of the group that discovery served
// within the last interval, for the namespace guard's selector Locks
// (webhook.ClusterConfig.Served).
func servedKinds(kinds *readmodel.Kinds, interval time.Duration) func() ([]schema.GroupKind, error) {
	return recentKinds(kinds, interval, func(k readmodel.ServedKind) (schema.GroupKind, bool) {
		return k.GVK.GroupKind(), k.Namespaced
	})
}

// watchedKinds lists the kinds of the group that discovery served within
// the last interval and the owner index watches (readmodel.ServedKind.
// Watched), in the version it watches them, for the cascade guard's walks
// before the owner index has synced (webhook.CascadeConfig.Kinds).
func watchedKinds(kinds *readmodel.Kinds, interval time.Duration) func() ([]schema.GroupVersionKind, error) {
	return recentKinds(kinds, interval, func(k readmodel.ServedKind) (schema.GroupVersionKind, bool) {
		return k.GVK, k.Watched()
	})
}

// recentKinds lists, of the kinds of the group that discovery served
// within the last interval (readmodel.Kinds.Recent), what pick keeps.
func recentKinds[T any](kinds *readmodel.Kinds, interval time.Duration, pick func(readmodel.ServedKind) (T, bool)) func() ([]T, error) {
	if interval <= 0 {
		interval = readmodel.DefaultDiscoveryInterval
	}
	return func() ([]T, error) {
		served, err := kinds.Recent(interval)
		if err != nil {
			return nil, err
		}
		var out []T
		for _, k := range served {
			if v, ok := pick(k); ok {
				out = append(out, v)
			}
		}
		return out, nil
	}
}
