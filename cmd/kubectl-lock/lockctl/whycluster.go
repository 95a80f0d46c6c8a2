package lockctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

var (
	namespaceGVK = schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}
	crdGVK       = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
)

// apiReader returns a controller-runtime client of the API server, the
// reader lockguard's namespace and CRD guards take: it lists Locks and
// objects' metadata, and maps kinds.
func apiReader(c *clients) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := lockv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.New(c.config, client.Options{Scheme: scheme})
}

// whyNamespace answers why for a namespace: its live Locks, split by
// whether their targets exist, and the verdict of decideCluster.
func whyNamespace(ctx context.Context, c *clients, name string) (*whyReport, error) {
	api, err := apiReader(c)
	if err != nil {
		return nil, err
	}
	ns := &unstructured.Unstructured{}
	ns.SetGroupVersionKind(namespaceGVK)
	if err := api.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return nil, err
	}
	locks, err := liveLocks(ctx, api, name)
	if err != nil {
		return nil, err
	}
	objects, kinds, err := groupObjects(ctx, c, name)
	if err != nil {
		return nil, err
	}
	served := make([]schema.GroupKind, 0, len(kinds))
	for gk := range kinds {
		served = append(served, gk)
	}
	covers := func(l *lockv1alpha1.Lock) (bool, error) { return selectorCovers(l, schema.GroupKind{}, objects), nil }
	r, err := clusterReport(ctx, api, whyTarget{Kind: namespaceGVK.Kind, Name: name}, namespaceGVK, ns, locks, served, covers)
	if err != nil {
		return nil, err
	}
	if ns.GetDeletionTimestamp() != nil {
		r.Notes = append(r.Notes, "The namespace is already terminating.")
	}
	if !r.Deletion.Blocked && len(r.Inside) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("Deleting it deletes its %d Lock(s) whose targets exist, and then the objects they protect.", len(r.Inside)))
	}
	return r, nil
}

// whyCRD answers why for a core.navique.com CustomResourceDefinition: the
// live Locks on existing objects of its kind (for the Lock CRD, every live
// Lock) and the verdict of decideCluster.
func whyCRD(ctx context.Context, c *clients, name string) (*whyReport, error) {
	api, err := apiReader(c)
	if err != nil {
		return nil, err
	}
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(crdGVK)
	if err := api.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return nil, err
	}
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	if group != lockv1alpha1.Group {
		// Only a ClusterLock protects it.
		return whyClusterObject(ctx, c, target{mapping: &meta.RESTMapping{GroupVersionKind: crdGVK}, name: name})
	}
	all, err := liveLocks(ctx, api, "")
	if err != nil {
		return nil, err
	}
	gk := schema.GroupKind{Group: group, Kind: kind}
	var locks []lockv1alpha1.Lock
	now := clock()
	for i := range all {
		if kind == "Lock" || all[i].CoversKind(gk, now) {
			locks = append(locks, all[i])
		}
	}
	covers := func(l *lockv1alpha1.Lock) (bool, error) {
		objects, _, err := groupObjects(ctx, c, l.Namespace)
		return err == nil && selectorCovers(l, gk, objects), err
	}
	target := whyTarget{Group: crdGVK.Group, Kind: crdGVK.Kind, Name: name}
	if kind == "Lock" {
		// Deleting the Lock CRD deletes every Lock, whatever it targets.
		r, err := clusterReport(ctx, api, target, crdGVK, crd, nil, nil, covers)
		if err != nil {
			return nil, err
		}
		for i := range locks {
			r.Inside = append(r.Inside, newWhyLock(&locks[i]))
		}
		if !r.Deletion.Blocked && len(r.Inside) > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("Deleting it deletes every Lock (%d live), and with them all protection.", len(r.Inside)))
		}
		return r, nil
	}
	r, err := clusterReport(ctx, api, target, crdGVK, crd, locks, nil, covers)
	if err != nil {
		return nil, err
	}
	if !r.Deletion.Blocked && len(r.Inside) > 0 {
		r.Notes = append(r.Notes, fmt.Sprintf("Deleting it removes every %s, the %d locked ones included, without admission: their Locks cannot stop it.", kind, len(r.Inside)))
	}
	return r, nil
}

// clusterReport is the report on obj (a Namespace or CRD, kind gvk): the
// verdict of decideCluster (with served) on its DELETE, and locks (live)
// split into those whose targets exist, or that cover something (covers,
// for selector Locks), and those that protect nothing.
func clusterReport(ctx context.Context, api client.Client, target whyTarget, gvk schema.GroupVersionKind, obj *unstructured.Unstructured, locks []lockv1alpha1.Lock,
	served []schema.GroupKind, covers func(*lockv1alpha1.Lock) (bool, error)) (*whyReport, error) {
	req, err := deleteRequest(gvk, "", obj.GetName(), obj.Object)
	if err != nil {
		return nil, err
	}
	resp, by := decideCluster(ctx, api, req, served)
	r := newClusterWhyReport(target, decisionOf(resp, by))
	if err := addClusterLocks(ctx, api, r, gvk, obj); err != nil {
		return nil, err
	}
	for i := range locks {
		exists, err := false, error(nil)
		if locks[i].HasSelector() {
			exists, err = covers(&locks[i])
		} else {
			exists, err = targetExists(ctx, api, &locks[i])
		}
		if err != nil {
			return nil, err
		}
		if exists {
			r.Inside = append(r.Inside, newWhyLock(&locks[i]))
		} else {
			r.ProtectNothing = append(r.ProtectNothing, newWhyLock(&locks[i]))
		}
	}
	return r, nil
}

// liveLocks lists the live Locks (Lock.Live) of namespace ns, or of
// all namespaces when ns is "", sorted by namespace and name.
func liveLocks(ctx context.Context, api client.Reader, ns string) ([]lockv1alpha1.Lock, error) {
	var list lockv1alpha1.LockList
	if err := api.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var live []lockv1alpha1.Lock
	now := clock()
	for i := range list.Items {
		if list.Items[i].Live(now) {
			live = append(live, list.Items[i])
		}
	}
	slices.SortFunc(live, func(a, b lockv1alpha1.Lock) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return live, nil
}

// targetExists reports whether the target of l, a live Lock, exists and is
// not being deleted. A kind that is not served, or is cluster-scoped, has
// no target a Lock can protect.
func targetExists(ctx context.Context, api client.Client, l *lockv1alpha1.Lock) (bool, error) {
	key, _ := l.StandingTarget()
	mapping, err := api.RESTMapper().RESTMapping(key.GroupKind())
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("mapping kind %s of Lock %s/%s: %w", key.GroupKind(), l.Namespace, l.Name, err)
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		return false, nil
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(mapping.GroupVersionKind)
	err = api.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, obj)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the target of Lock %s/%s: %w", l.Namespace, l.Name, err)
	}
	return obj.DeletionTimestamp == nil, nil
}

// newClusterWhyReport is the report on a cluster-scoped target with its
// deletion's verdict, every list empty (printed as [], not null), for the
// callers to fill.
func newClusterWhyReport(target whyTarget, deletion whyDecision) *whyReport {
	return &whyReport{
		Target:         target,
		Deletion:       deletion,
		Direct:         []whyLock{},
		Descendants:    []whyDescendant{},
		Inside:         []whyLock{},
		ProtectNothing: []whyLock{},
		Selectors:      []whySelector{},
		Notes:          []string{},
	}
}
