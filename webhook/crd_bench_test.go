package webhook_test

import (
	"time"

	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/webhook"
)

// BenchmarkCRDDecision is the CRD guard's decision in process, from the
// real readmodel.LockIndex (the informer cache, lockguard's transform
// and indexes) holding 10,000 live Locks on Stacks in 100 namespaces and
// 10 on existing Widgets: the delete of the Widget CRD (denied by the 10)
// and of the Lock CRD (denied by all). read=kind-index is lockguard's
// cache; read=all-locks is the reads of 321d9e2, before issue 22's fix,
// rebuilt on the same informer: every read copies every live Lock, which
// the guard then filters (Widget CRD) or names all of (Lock CRD). Both run in
// the same process, one after the other:
//
//	go test -run '^$' -bench BenchmarkCRDDecision -benchmem ./webhook
func BenchmarkCRDDecision(b *testing.B) {
	const others, widgets, namespaces = 10_000, 10, 100
	list := &lockv1alpha1.LockList{}
	targets := &widgetTargets{names: map[string][]string{}}
	for i := range others {
		ns := fmt.Sprintf("ns-%03d", i%namespaces)
		list.Items = append(list.Items, *benchLock(ns, fmt.Sprintf("keep-stack-%05d", i), "Stack", fmt.Sprintf("stack-%05d", i)))
	}
	for i := range widgets {
		ns := fmt.Sprintf("ns-%03d", i)
		list.Items = append(list.Items, *benchLock(ns, fmt.Sprintf("keep-widget-%02d", i), "Widget", "w"))
		targets.names[ns] = append(targets.names[ns], "w")
	}
	index, informer := lockCacheOf(b, list)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Widget"}, meta.RESTScopeNamespace)
	mapper.Add(schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}, meta.RESTScopeNamespace)

	for _, read := range []struct {
		name  string
		cache webhook.Locks
	}{
		{"read=all-locks(before)", allLocks{LockIndex: index, informer: informer}},
		{"read=kind-index(after)", index},
	} {
		for _, crd := range []struct {
			kind string
			want string
		}{
			{"Widget", "customresourcedefinition is protected by Lock(s) [ns-000/keep-widget-00 "},
			{"Lock", "customresourcedefinition is protected by Lock(s) [ns-000/keep-stack-00000 "},
		} {
			b.Run("crd="+crd.kind+"/"+read.name, func(b *testing.B) {
				h := webhook.NewHandler(webhook.Config{Locks: read.cache, Cluster: &webhook.ClusterConfig{API: targets, Kinds: mapper}})
				req := crdDelete(crd.kind)
				for b.Loop() {
					resp := h.Decide(context.Background(), req)
					if resp.Allowed || !strings.HasPrefix(resp.Result.Message, crd.want) {
						b.Fatalf("Decide(%s CRD): %+v, want denied with %q", crd.kind, resp.Result, crd.want)
					}
				}
			})
		}
	}
}

// benchLock is a live Lock ns/name on the kind object target.
func benchLock(ns, name, kind, target string) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: "1"},
		Spec: lockv1alpha1.LockSpec{
			TargetRef: lockv1alpha1.TargetReference{APIVersion: lockv1alpha1.GroupVersion.String(), Kind: kind, Name: target},
			Reason:    "Production environment - remove this Lock deliberately before deleting.",
		},
	}
}

// crdDelete is the DELETE of the CRD of kind in core.navique.com.
func crdDelete(kind string) webhook.Request {
	name := strings.ToLower(kind) + "s." + lockv1alpha1.Group
	r := webhook.Request{Operation: admissionv1.Delete, Name: name,
		Kind: metav1.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}}
	r.OldObject.Metadata.Name = name
	r.OldObject.Spec = webhook.ObjectSpec{Group: lockv1alpha1.Group, Names: webhook.SpecNames{Kind: kind}}
	return r
}

// widgetTargets is an API server that serves the Widgets of names, by
// namespace, as metadata, and no Locks.
type widgetTargets struct{ names map[string][]string }

func (w *widgetTargets) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok {
		return nil
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	for _, name := range w.names[o.Namespace] {
		l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: name}})
	}
	return nil
}

// allLocks is the Lock cache as the CRD guard read it before issue 22:
// every read copies every live Lock of the informer, as LiveLocksIn("") of
// 321d9e2 did (its code, on the informer's store). The guard filters what
// it gets by kind, and AnyLiveLocks hands it all, as the Lock CRD's
// decision took them.
type allLocks struct {
	*readmodel.LockIndex
	informer toolscache.SharedIndexInformer
}

func (a allLocks) all() []lockv1alpha1.Lock {
	var locks []lockv1alpha1.Lock
	for _, o := range a.informer.GetIndexer().List() {
		// The cache's Locks are readmodel.CachedLocks.
		if l, ok := readmodel.AsLock(o).(*lockv1alpha1.Lock); ok {
			if _, live := l.LiveTarget(time.Time{}); live {
				locks = append(locks, *l.DeepCopy())
			}
		}
	}
	return locks
}

func (a allLocks) LiveLocksOfKind(schema.GroupKind) ([]lockv1alpha1.Lock, error) {
	return a.all(), nil
}

func (a allLocks) AnyLiveLocks(int) ([]lockv1alpha1.Lock, int, error) {
	locks := a.all()
	return locks, len(locks), nil
}
