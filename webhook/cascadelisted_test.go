package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

// objectsAPI is an API server of objects (fakeGraph's): it serves their
// metadata lists by kind and namespace, pageSize items a page (1 when
// 0), each page a fresh copy as a decoded list would be; err fails the
// list of kind failing (every list when failing is empty).
type objectsAPI struct {
	objects  []graphObject
	pageSize int
	err      error
	failing  string

	lists []string              // "Kind/namespace/continue" of each list served
	opts  []*client.ListOptions // the options of each list served
}

func (a *objectsAPI) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l, ok := list.(*metav1.PartialObjectMetadataList)
	if !ok {
		return fmt.Errorf("unexpected list %T", list)
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	kind := strings.TrimSuffix(l.GroupVersionKind().Kind, "List")
	a.lists = append(a.lists, kind+"/"+o.Namespace+"/"+o.Continue)
	a.opts = append(a.opts, o)
	if a.err != nil && (a.failing == "" || a.failing == kind) {
		return a.err
	}
	var in []graphObject
	for _, g := range a.objects {
		if g.gk.Group == l.GroupVersionKind().Group && g.gk.Kind == kind && g.meta.Namespace == o.Namespace {
			in = append(in, g)
		}
	}
	size := max(a.pageSize, 1)
	next := 0
	if o.Continue != "" {
		fmt.Sscan(o.Continue, &next)
	}
	end := min(next+size, len(in))
	for _, g := range in[next:end] {
		l.Items = append(l.Items, *g.meta.DeepCopy())
	}
	if end < len(in) {
		l.Continue = fmt.Sprint(end)
	}
	return nil
}

// forgeKinds are the kinds the cascade tests' graphs hold.
func forgeKinds() ([]schema.GroupVersionKind, error) {
	return []schema.GroupVersionKind{
		{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
		{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "PostgresCluster"},
	}, nil
}

// TestListMetadata: the shared paging of the guards' metadata lists reads
// every page of one kind in one namespace, metadataPageSize at a time,
// each page with the continue token of the one before, and stops at the
// first error: of a page, of its caller, or of the context between pages.
func TestListMetadata(t *testing.T) {
	var objects []graphObject
	for i := range 5 {
		objects = append(objects, obj("Stack", fmt.Sprintf("s%d", i)))
	}
	objects = append(objects, obj("PostgresCluster", "db"), with(obj("Stack", "elsewhere"), func(m *metav1.PartialObjectMetadata) { m.Namespace = "other" }))
	stack := schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"}

	api := &objectsAPI{objects: objects, pageSize: 2}
	var names []string
	err := listMetadata(context.Background(), api, stack, "forge", func(o *metav1.PartialObjectMetadata) error {
		names = append(names, o.Name)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s0", "s1", "s2", "s3", "s4"}; !slices.Equal(names, want) {
		t.Errorf("listed %q, want %q", names, want)
	}
	if want := []string{"Stack/forge/", "Stack/forge/2", "Stack/forge/4"}; !slices.Equal(api.lists, want) {
		t.Errorf("lists %q, want %q", api.lists, want)
	}
	for _, o := range api.opts {
		if o.Limit != metadataPageSize || o.Namespace != "forge" {
			t.Errorf("a list with limit %d in namespace %q, want %d in forge", o.Limit, o.Namespace, metadataPageSize)
		}
	}

	stop := errors.New("enough")
	api = &objectsAPI{objects: objects, pageSize: 2}
	n := 0
	err = listMetadata(context.Background(), api, stack, "forge", func(*metav1.PartialObjectMetadata) error {
		if n++; n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || len(api.lists) != 2 {
		t.Errorf("a caller that stops at the third object: %v after %d pages, want its error after 2", err, len(api.lists))
	}

	api = &objectsAPI{objects: objects, err: errors.New("etcdserver: request timed out")}
	if err := listMetadata(context.Background(), api, stack, "forge", func(*metav1.PartialObjectMetadata) error { return nil }); err == nil ||
		err.Error() != "listing Stack.core.navique.com in namespace forge from the API server: etcdserver: request timed out" {
		t.Errorf("a list that fails: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	api = &objectsAPI{objects: objects, pageSize: 2}
	err = listMetadata(ctx, api, stack, "forge", func(*metav1.PartialObjectMetadata) error {
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || len(api.lists) != 1 {
		t.Errorf("a context that ends during the first page: %v after %d pages, want context.Canceled after 1", err, len(api.lists))
	}
}

// TestListGraph: the graph of a namespace as listed holds each object of
// every kind once, by name and by each owner UID it names (once, however
// often it names it), and of each object only what the cascade guard
// reads; it refuses to hold more than its bound.
func TestListGraph(t *testing.T) {
	objects := []graphObject{
		with(obj("Stack", "root"), func(m *metav1.PartialObjectMetadata) {
			m.Labels = map[string]string{"tier": "web"}
			m.Annotations = map[string]string{"note": strings.Repeat("x", 1000)}
			m.Finalizers = []string{"example.com/keep", metav1.FinalizerDeleteDependents}
		}),
		with(obj("PostgresCluster", "db", "Stack/root", "Stack/root"), func(m *metav1.PartialObjectMetadata) {
			m.Labels = map[string]string{"tier": "data"}
			m.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
		}),
		obj("Stack", "mid", "Stack/root"),
	}
	g, err := listGraph(context.Background(), &objectsAPI{objects: objects}, must(forgeKinds()), "forge", 3)
	if err != nil {
		t.Fatal(err)
	}
	var deps []string
	if err := g.Dependents("forge", "uid-root", func(gk schema.GroupKind, o metav1.Object) bool {
		deps = append(deps, gk.Kind+"/"+o.GetName())
		return true
	}); err != nil {
		t.Fatal(err)
	}
	// In the order listed: the kinds in forgeKinds' order.
	if want := []string{"Stack/mid", "PostgresCluster/db"}; !slices.Equal(deps, want) {
		t.Errorf("Dependents(uid-root) = %q, want %q", deps, want)
	}
	root, watched := g.Owner("forge", metav1.OwnerReference{APIVersion: "core.navique.com/v1", Kind: "Stack", Name: "root"})
	if !watched || root == nil {
		t.Fatalf("Owner(Stack/root) = %v, %v; want it found (the version does not matter)", root, watched)
	}
	want := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "root", UID: "uid-root", Finalizers: []string{metav1.FinalizerDeleteDependents}}}
	if diff := cmp.Diff(want, root); diff != "" {
		t.Errorf("Stack/root as held (no labels without owners, the collector's finalizers only, no annotations): -want, +got:\n%s", diff)
	}
	db, _ := g.Owner("forge", metav1.OwnerReference{APIVersion: "core.navique.com/v1alpha1", Kind: "PostgresCluster", Name: "db"})
	if db == nil || db.GetLabels()["tier"] != "data" || db.GetManagedFields() != nil {
		t.Errorf("PostgresCluster/db as held: %+v; want its labels (a selector Lock may cover it), no managedFields", db)
	}
	for _, ref := range []metav1.OwnerReference{
		{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "gone"},
	} {
		if o, watched := g.Owner("forge", ref); o != nil || !watched {
			t.Errorf("Owner(%s/%s) = %v, %v; want none, watched", ref.Kind, ref.Name, o, watched)
		}
	}
	for _, ref := range []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "cm"},
		{APIVersion: "core.navique.com/v1alpha1", Kind: "Widget", Name: "w"},
	} {
		if _, watched := g.Owner("forge", ref); watched {
			t.Errorf("Owner(%s/%s) watched; want not: its kind was not listed", ref.Kind, ref.Name)
		}
	}
	if _, watched := g.Owner("other", metav1.OwnerReference{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "root"}); watched {
		t.Error("Owner in a namespace not listed: watched; want not")
	}
	if err := g.Dependents("other", types.UID("uid-root"), func(schema.GroupKind, metav1.Object) bool { return true }); err == nil {
		t.Error("Dependents in a namespace not listed: no error")
	}

	if _, err := listGraph(context.Background(), &objectsAPI{objects: objects}, must(forgeKinds()), "forge", 2); err == nil ||
		err.Error() != "namespace forge holds more than 2 objects of the group, more than lockguard reads from the API server for one delete" {
		t.Errorf("listGraph over its bound: %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestCascadeListedFailsClosed: while the graph cannot answer, a cascade
// that cannot be read from the API server (a list fails, discovery fails,
// the namespace is over the bound, every slot is taken until the
// deadline) refuses the delete, whatever the mode; an Orphan delete, which
// deletes nothing, keeps the object guard's answer. Each read is counted
// under ReasonOwners.
func TestCascadeListedFailsClosed(t *testing.T) {
	objects := []graphObject{obj("Stack", "mid", "Stack/root"), obj("PostgresCluster", "db", "Stack/mid")}
	unsynced := &fakeGraph{err: errors.New("the kinds of the group have not been discovered yet")}
	refused := func(cause string) result {
		return result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
			Message: "lockguard could not read the dependents of Stack.core.navique.com forge/root from the API server (its owner index has not synced yet), so the delete is refused; retry when lockguard is ready: " + cause}
	}
	full := newSlots(maxListedWalks, "cascades over the API server's lists")
	for range maxListedWalks {
		full.tokens <- struct{}{}
	}
	cases := map[string]struct {
		api    *objectsAPI
		kinds  func() ([]schema.GroupVersionKind, error)
		limits CascadeLimits
		mode   CascadeMode
		slots  *slots
		req    Request
		want   result
	}{
		"ListFails": {
			api:  &objectsAPI{objects: objects, err: errors.New("conversion webhook for core.navique.com/v1, Kind=PostgresCluster failed"), failing: "PostgresCluster"},
			req:  ownerDelete(""),
			want: refused("listing PostgresCluster.core.navique.com in namespace forge from the API server: conversion webhook for core.navique.com/v1, Kind=PostgresCluster failed"),
		},
		"ListFailsWarn": {
			api:  &objectsAPI{objects: objects, err: errors.New("connection refused")},
			mode: CascadeWarn,
			req:  ownerDelete(""),
			want: refused("listing Stack.core.navique.com in namespace forge from the API server: connection refused"),
		},
		"DiscoveryFails": {
			api: &objectsAPI{objects: objects},
			kinds: func() ([]schema.GroupVersionKind, error) {
				return nil, errors.New("the server is currently unable to handle the request")
			},
			req:  ownerDelete(""),
			want: refused("discovering the kinds of the group: the server is currently unable to handle the request"),
		},
		"OverTheBound": {
			api:    &objectsAPI{objects: objects},
			limits: CascadeLimits{MaxListed: 1},
			req:    ownerDelete(""),
			want:   refused("namespace forge holds more than 1 objects of the group, more than lockguard reads from the API server for one delete"),
		},
		"SlotsTaken": {
			api:   &objectsAPI{objects: objects},
			slots: &full,
			req:   ownerDelete(""),
			want:  refused(fmt.Sprintf("lockguard is deciding %d cascades over the API server's lists already; retry: context deadline exceeded", maxListedWalks)),
		},
		"OrphanListFails": {
			api:  &objectsAPI{objects: objects, err: errors.New("connection refused")},
			req:  ownerDelete(metav1.DeletePropagationOrphan),
			want: result{Allowed: true, Code: 200},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			kinds := tc.kinds
			if kinds == nil {
				kinds = forgeKinds
			}
			mode := tc.mode
			if mode == "" {
				mode = CascadeDeny
			}
			m := NewMetrics()
			if err := m.Register(prometheus.NewRegistry()); err != nil {
				t.Fatal(err)
			}
			f := &freshness{mayLack: true, calls: new([]string)}
			h := NewHandler(Config{Locks: locksOn("db"), Freshness: f, Metrics: m,
				Cascade: CascadeConfig{Graph: unsynced, Mode: mode, Limits: tc.limits, API: tc.api, Kinds: kinds}})
			if tc.slots != nil {
				h.cascadeOf().listed.slots = *tc.slots
			}
			// A deadline of its own: SlotsTaken waits for it.
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			resp := h.Decide(ctx, tc.req)
			if diff := cmp.Diff(tc.want, resultOf(resp)); diff != "" {
				t.Errorf("Decide(...): -want, +got:\n%s", diff)
			}
			if len(resp.Warnings) > 0 {
				t.Errorf("warnings %q, want none", resp.Warnings)
			}
			if tc.slots == nil && !slices.Contains(f.confirmed, ReasonOwners) {
				t.Errorf("confirmations %q, want one of reason %q", f.confirmed, ReasonOwners)
			}
		})
	}
}

// TestCascadeListedOnlyUnsynced: a graph that answers is the only thing
// read; the API server is read only while it cannot.
func TestCascadeListedOnlyUnsynced(t *testing.T) {
	objects := []graphObject{obj("PostgresCluster", "db", "Stack/root")}
	api := &objectsAPI{objects: objects}
	h := NewHandler(Config{Locks: locksOn("db"), Cascade: CascadeConfig{Graph: &fakeGraph{objects: objects}, Mode: CascadeDeny, API: api, Kinds: forgeKinds}})
	if got := resultOf(h.Decide(context.Background(), ownerDelete(""))); got.Allowed {
		t.Errorf("Decide over a synced graph: %+v, want denied", got)
	}
	if len(api.lists) > 0 {
		t.Errorf("the API server was listed (%q) though the graph answered", api.lists)
	}
}

// generatedAPI serves n Stacks of namespace forge as the API server lists
// them, each page freshly built (as a decoded page is): labels, kubectl's
// last-applied annotation, managedFields, and, for nine in ten, an owner.
type generatedAPI struct{ n int }

func (a generatedAPI) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	l := list.(*metav1.PartialObjectMetadataList)
	o := (&client.ListOptions{}).ApplyOptions(opts)
	next := 0
	if o.Continue != "" {
		fmt.Sscan(o.Continue, &next)
	}
	end := min(next+int(o.Limit), a.n)
	for i := next; i < end; i++ {
		name := fmt.Sprintf("stack-%07d", i)
		m := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "forge", UID: types.UID(fmt.Sprintf("1c9e3b7a-5d2f-4e8a-9b6c-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i),
			Labels:        map[string]string{"app.kubernetes.io/name": "forge", "tier": "backend"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 300)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", FieldsV1: &metav1.FieldsV1{Raw: []byte(strings.Repeat("f", 200))}}},
		}}
		if i%10 != 0 {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: fmt.Sprintf("stack-%07d", i-i%10), UID: types.UID(fmt.Sprintf("1c9e3b7a-5d2f-4e8a-9b6c-%012d", i-i%10))}}
		}
		l.Items = append(l.Items, m)
	}
	if end < a.n {
		l.Continue = fmt.Sprint(end)
	}
	return nil
}

// TestListGraphHeap: a walk over the API server's lists holds under
// 1.25 KiB of heap per object of the namespace (908 bytes when written; it
// keeps what the cascade guard reads, not the pages, which would be about
// 2 KiB), which with maxListedWalks walks of CascadeLimits.MaxListed's
// default bounds what the walks hold together (docs/how-it-works.md).
func TestListGraphHeap(t *testing.T) {
	const n = 20000
	before := readmodeltest.LiveHeap()
	g, err := listGraph(context.Background(), generatedAPI{n: n}, must(forgeKinds())[:1], "forge", n)
	if err != nil {
		t.Fatal(err)
	}
	per := float64(readmodeltest.LiveHeap()-before) / n
	runtime.KeepAlive(g)
	t.Logf("%d objects listed: %.0f bytes of heap each", n, per)
	if per > 1280 {
		t.Errorf("%.0f bytes of heap per listed object, want at most 1.25 KiB", per)
	}
}

// TestCascadeListedNoLocks: when the API server cannot list the owner's
// namespace before the owner index has synced, the delete is refused only
// if the namespace holds a live Lock: a cascade deletes only objects of the
// owner's namespace, so with no Lock there nothing locked can be lost (an
// unlistable kind elsewhere in the group does not stop owner deletes in
// namespaces without Locks).
func TestCascadeListedNoLocks(t *testing.T) {
	s := lockScheme(t)
	objects := []graphObject{obj("Stack", "mid", "Stack/root"), obj("PostgresCluster", "db", "Stack/mid")}
	broken := &objectsAPI{objects: objects, err: errors.New("conversion webhook for core.navique.com/v1, Kind=PostgresCluster failed"), failing: "PostgresCluster"}
	unsynced := &fakeGraph{err: errors.New("the kinds of the group have not been discovered yet")}
	for name, tc := range map[string]struct {
		locks   []client.Object
		allowed bool
	}{
		"NoLockInNamespace":      {allowed: true},
		"LockElsewhere":          {locks: []client.Object{newLock("other", "keep", "", "Stack", "x")}, allowed: true},
		"LockOfAnotherObject":    {locks: []client.Object{newLock("forge", "keep", "", "Stack", "unrelated")}},
		"LockOfTheLostDependent": {locks: []client.Object{newLock("forge", "keep-db", "", "PostgresCluster", "db")}},
	} {
		t.Run(name, func(t *testing.T) {
			live := fake.NewClientBuilder().WithScheme(s).WithObjects(tc.locks...).Build()
			h := NewHandler(Config{Locks: locksOn(), Live: live,
				Cascade: CascadeConfig{Graph: unsynced, Mode: CascadeDeny, API: broken, Kinds: forgeKinds}})
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			got := resultOf(h.Decide(ctx, ownerDelete("")))
			if got.Allowed != tc.allowed {
				t.Errorf("Decide(...) = %+v, want allowed %v", got, tc.allowed)
			}
			if !tc.allowed && got.Code != http.StatusServiceUnavailable {
				t.Errorf("Decide(...) code %d, want %d (could not list)", got.Code, http.StatusServiceUnavailable)
			}
		})
	}
}
