package lockctl

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// target is a resource a Lock may name: a served, namespaced kind other
// than Lock and LockException, and a name. Whether a kind of another group
// is protected (opted in: the chart's protect.resources) is the server's
// to say: its Lock becomes InvalidTarget, with a message, when it is not.
type target struct {
	mapping *meta.RESTMapping
	name    string
}

// kind returns the served kind, as a Lock's targetRef.kind must spell it.
func (t target) kind() string { return t.mapping.GroupVersionKind.Kind }

// String names the target the way kubectl does: stack.core.navique.com/forge,
// persistentvolumeclaim/data (the core group), statefulset.apps/db,
// namespace/prod.
func (t target) String() string {
	gvk := t.mapping.GroupVersionKind
	if gvk.Group == "" {
		return strings.ToLower(gvk.Kind) + "/" + t.name
	}
	return strings.ToLower(gvk.Kind) + "." + gvk.Group + "/" + t.name
}

// resolveTarget parses TYPE/NAME and resolves TYPE through discovery the
// way kubectl does (stack, stacks, Stack, st, stacks.core.navique.com,
// Stack.v1alpha1.core.navique.com all name the served kind Stack; pvc,
// persistentvolumeclaim, statefulsets.apps name kinds of other groups). An
// unqualified TYPE that several groups serve resolves to core.navique.com's.
// It refuses what no Lock can protect: Locks themselves, LockExceptions and
// cluster-scoped kinds; for a kind a ClusterLock protects, the error is a
// clusterScoped, which holds the target (kubectl lock, unlock and why take
// ClusterLocks for it). A namespaced kind of another group is not refused
// here: the server decides whether the installation protects it
// (docs/optin.md).
func resolveTarget(ctx context.Context, mapper meta.RESTMapperWithContext, arg string) (target, error) {
	typ, name, ok := strings.Cut(arg, "/")
	if !ok || typ == "" || name == "" || strings.Contains(name, "/") {
		return target{}, fmt.Errorf("%q is not TYPE/NAME (for example stack/forge)", arg)
	}
	mapping, err := resolveType(ctx, mapper, typ)
	if err != nil {
		return target{}, err
	}
	gvk := mapping.GroupVersionKind
	gr := mapping.Resource.GroupResource()
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace && lockv1alpha1.ClusterProtectable(gvk.GroupKind()) == nil {
		return target{mapping: mapping, name: name}, clusterScoped{target{mapping: mapping, name: name}}
	}
	own := gvk.Group == lockv1alpha1.Group
	switch {
	case own && gvk.Kind == "Lock":
		return target{}, fmt.Errorf("a Lock cannot be locked: delete protection applies to the resources Locks protect")
	case own && gvk.Kind == "LockException":
		return target{}, lockv1alpha1.ErrExceptionTarget
	case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
		return target{}, fmt.Errorf("%s is cluster-scoped: a Lock protects a resource in its own namespace", gr)
	}
	return target{mapping: mapping, name: name}, nil
}

// resolveType maps a resource or kind argument to its REST mapping, as
// kubectl's resource builder does, preferring core.navique.com when the
// argument names no group.
func resolveType(ctx context.Context, mapper meta.RESTMapperWithContext, typ string) (*meta.RESTMapping, error) {
	fullGVR, gr := schema.ParseResourceArg(typ)
	var gvk schema.GroupVersionKind
	if fullGVR != nil {
		gvk, _ = mapper.KindForWithContext(ctx, *fullGVR)
	}
	if gvk.Empty() {
		kinds, _ := mapper.KindsForWithContext(ctx, gr.WithVersion(""))
		for _, k := range kinds {
			if gr.Group != "" || k.Group == lockv1alpha1.Group {
				gvk = k
				break
			}
		}
		if gvk.Empty() && len(kinds) > 0 {
			gvk = kinds[0]
		}
	}
	if !gvk.Empty() {
		return mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	}
	// A kind: Stack, Stack.core.navique.com, Stack.v1alpha1.core.navique.com.
	fullGVK, gk := schema.ParseKindArg(typ)
	if fullGVK != nil {
		if m, err := mapper.RESTMappingWithContext(ctx, fullGVK.GroupKind(), fullGVK.Version); err == nil {
			return m, nil
		}
	}
	m, err := mapper.RESTMappingWithContext(ctx, gk)
	if meta.IsNoMatchError(err) {
		return nil, fmt.Errorf("the server doesn't have a resource type %q", gr.Resource)
	}
	return m, err
}
