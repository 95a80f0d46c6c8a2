package lockctl

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// Selector ClusterLocks in the plugin (docs/clusterlock.md, By selector):
// kubectl lock TYPE --selector LABELS, TYPE a cluster-scoped kind a
// ClusterLock protects (namespaces, crds, clusterroles...), creates the
// ClusterLock whose selector names that kind and those labels.

// isClusterSelectorScope reports whether kubectl lock's arguments are
// TYPE --selector LABELS: one argument without a name, and a selector.
func (o *lockOptions) isClusterSelectorScope(args []string) bool {
	return len(args) == 1 && o.selector != "" && !o.all && !strings.Contains(args[0], "/")
}

// runClusterSelector creates the selector ClusterLock of kind typ and
// o.selector, named KIND-LABELS (namespace-env-prod) unless --name says
// otherwise, and waits as for a Lock: until it is active (a ReadOnly one,
// its freeze in force). A namespaced typ is refused, saying that a
// namespace's resources take --selector alone.
func (o *lockOptions) runClusterSelector(ctx context.Context, s Streams, typ string) error {
	c, err := o.flags.clients()
	if err != nil {
		return err
	}
	mapping, err := resolveType(ctx, c.mapper, typ)
	if err != nil {
		return err
	}
	gk := mapping.GroupVersionKind.GroupKind()
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return fmt.Errorf("%s is namespaced: TYPE --selector LABELS creates a ClusterLock on cluster-scoped objects; to lock the resources of a namespace by label, give --selector alone", mapping.Resource.GroupResource())
	}
	if err := lockv1alpha1.ClusterProtectable(gk); err != nil {
		return err
	}
	sel, err := parseSelector(o.selector)
	if err != nil {
		return err
	}
	sel.Kinds = []string{gk.Kind}
	name := o.name
	if name == "" {
		labels, err := defaultSelectorLockName(&lockv1alpha1.LockSelector{MatchLabels: sel.MatchLabels, MatchExpressions: sel.MatchExpressions})
		if err != nil {
			return err
		}
		name = strings.ToLower(gk.Kind) + "-" + labels
	}
	lock := o.newLock("", name)
	lock.Spec.Selector = sel
	what := fmt.Sprintf("the %s objects that match %s, now or later,", gk.Kind, o.selector)
	done := func(readOnly bool) string {
		if readOnly {
			return fmt.Sprintf("%s are locked read-only: their deletion, and changes to their spec and metadata (except by exempt principals), are denied until the ClusterLock %s is deleted", what, name)
		}
		return fmt.Sprintf("%s are locked: their deletion is denied until the ClusterLock %s is deleted", what, name)
	}
	return o.create(ctx, s, c.clusterLocks(), lock, done, func(existing *lockv1alpha1.Lock) error {
		if !sameScope(existing, sel) {
			return fmt.Errorf("%s %q already exists and protects %s: choose another name with --name", clusterLockGroupResource, name, scopeString(existing))
		}
		return nil
	})
}
