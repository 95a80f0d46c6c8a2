package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/source"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
	"github.com/navique/lockguard/internal/readmodel/readmodeltest"
)

// The kinds of the tests below.
var (
	stackKind = readmodel.ServedKind{
		GVK:      schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Stack"},
		Resource: schema.GroupResource{Group: lockv1alpha1.Group, Resource: "stacks"}, Namespaced: true, Watchable: true,
	}
	pgKind = readmodel.ServedKind{
		GVK:      schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "PostgresCluster"},
		Resource: schema.GroupResource{Group: lockv1alpha1.Group, Resource: "postgresclusters"}, Namespaced: true, Watchable: true,
	}
)

// metadataInformer is a metadata informer of a fake cache: synced or not
// (a kind whose CRD was deleted, or whose list fails, never syncs), with
// the namespace index of controller-runtime's informers.
type metadataInformer struct {
	*controllertest.FakeInformer
	synced  atomic.Bool
	indexer toolscache.Indexer
}

func (i *metadataInformer) HasSynced() bool                { return i.synced.Load() }
func (i *metadataInformer) GetIndexer() toolscache.Indexer { return i.indexer }

// metadataCache is a cache of metadata informers, one per kind, that only
// hands out its informers: every other call fails the test (the
// reconciler's event handlers must not wait on the cache).
type metadataCache struct {
	cache.Cache
	t         *testing.T
	informers map[schema.GroupVersionKind]*metadataInformer
}

func newMetadataCache(t *testing.T) *metadataCache {
	return &metadataCache{t: t, informers: map[schema.GroupVersionKind]*metadataInformer{}}
}

// add gives the cache an informer of kind k, synced or not, holding objs.
func (c *metadataCache) add(k readmodel.ServedKind, synced bool, objs ...*metav1.PartialObjectMetadata) {
	indexer := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := indexer.Add(o); err != nil {
			c.t.Fatal(err)
		}
	}
	inf := &metadataInformer{FakeInformer: controllertest.NewFakeInformer(), indexer: indexer}
	inf.synced.Store(synced)
	c.informers[k.GVK] = inf
}

func (c *metadataCache) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	inf, ok := c.informers[obj.GetObjectKind().GroupVersionKind()]
	if !ok {
		return nil, errors.New("no such informer")
	}
	return inf, nil
}

func (c *metadataCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	c.t.Error("the cache was listed: a list waits for the kind's informer to sync")
	return errors.New("not listed here")
}

func (c *metadataCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	c.t.Error("the cache was read: a read waits for the kind's informer to sync")
	return errors.New("not read here")
}

// startingController is a controller whose Watch, once block is set,
// waits until release is closed, as controller-runtime's does while the
// controller starts: its Start holds the lock that Watch takes until every
// source has synced, that is until the sources' event handlers have taken
// their initial lists.
type startingController struct {
	controller.TypedController[item]
	mu      sync.Mutex
	block   bool
	entered chan struct{}
	release chan struct{}
}

func newStartingController() *startingController {
	return &startingController{entered: make(chan struct{}), release: make(chan struct{})}
}

// starting makes the next Watch calls wait for release.
func (c *startingController) starting() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.block = true
}

func (c *startingController) Watch(source.TypedSource[item]) error {
	c.mu.Lock()
	block := c.block
	c.mu.Unlock()
	if block {
		close(c.entered)
		<-c.release
	}
	return nil
}

// object returns an object of namespace ns with labels.
func object(ns, name string, labels map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

// selectorLockOf returns a selector Lock of namespace ns with s.
func selectorLockOf(ns, name string, s lockv1alpha1.LockSelector) *lockv1alpha1.Lock {
	return &lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: lockv1alpha1.LockSpec{Selector: &s}}
}

// TestLockEventsWhileAWatchIsAdded: the event handler of a selector Lock
// never waits for a target watch being added. A new leader's controller
// starts with its sources, and waits, holding the lock that Watch takes,
// until their event handlers have taken their initial lists; meanwhile
// kind discovery finds the group's kinds (already synced in the cache that
// every replica keeps for the cascade guard) and adds their watches. A
// handler that waited for the watch being added, while the watch waits for
// the handler, held the reconciler's start until shutdown (chaos-short
// with selector Locks, issue 24).
func TestLockEventsWhileAWatchIsAdded(t *testing.T) {
	c := newMetadataCache(t)
	c.add(stackKind, true, object("forge", "web", map[string]string{"tier": "db"}), object("forge", "api", nil), object("other", "db", map[string]string{"tier": "db"}))
	c.add(pgKind, true)
	ctl := newStartingController()
	defer close(ctl.release)
	w := newTargetWatches(c, ctl, nil)
	if err := w.ensure(t.Context(), stackKind); err != nil {
		t.Fatal(err)
	}

	// Discovery adds the PostgresCluster watch while the controller starts.
	ctl.starting()
	go func() { _ = w.ensure(t.Context(), pgKind) }()
	<-ctl.entered

	// The Lock source's handler takes a selector Lock of its initial list.
	r := &reconciler{watches: w, namespaceGuard: true}
	q := newQueue()
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		lockEvents{r}.Create(t.Context(), event.TypedCreateEvent[*lockv1alpha1.Lock]{Object: selectorLockOf("forge", "keep-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}), IsInInitialList: true}, q)
	}()
	select {
	case <-handled:
	case <-time.After(time.Minute):
		t.Fatal("the Lock event handler still waits, a minute on, for the PostgresCluster watch being added, which waits for the controller's start, which waits for the handler")
	}
	want := []request{
		{Lock: client.ObjectKey{Namespace: "forge", Name: "keep-db"}},
		{Namespace: "forge"},
		{Target: lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "web"}},
	}
	if diff := cmp.Diff(want, drain(q)); diff != "" {
		t.Errorf("enqueued -want, +got:\n%s", diff)
	}
}

// TestEachInReadsSyncedKindsOnly: what a selector Lock covers is read from
// the informers of the watched kinds that have synced, in the Lock's
// namespace only; a kind whose informer has not synced (its CRD deleted,
// its list failing) is skipped, without a read of the cache, which would
// wait for it.
func TestEachInReadsSyncedKindsOnly(t *testing.T) {
	c := newMetadataCache(t)
	c.add(stackKind, true, object("forge", "web", map[string]string{"tier": "db"}), object("forge", "api", nil), object("other", "db", map[string]string{"tier": "db"}))
	c.add(pgKind, false, object("forge", "db", map[string]string{"tier": "db"}))
	w := newTargetWatches(c, newStartingController(), nil)
	for _, k := range []readmodel.ServedKind{stackKind, pgKind} {
		if err := w.ensure(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	got := w.targetsIn(t.Context(), "forge", &lockv1alpha1.LockSelector{})
	want := []request{
		{Target: lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "api"}},
		{Target: lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "web"}},
	}
	sortRequests := cmpopts.SortSlices(func(a, b request) bool { return a.Target.String() < b.Target.String() })
	if diff := cmp.Diff(want, got, sortRequests); diff != "" {
		t.Errorf("targetsIn(forge, {}): -want, +got:\n%s", diff)
	}
	p, _, err := w.protected(selectorLockOf("forge", "keep-db", lockv1alpha1.LockSelector{MatchLabels: map[string]string{"tier": "db"}}))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&lockv1alpha1.ProtectedStatus{Count: 1, Resources: []lockv1alpha1.ProtectedResource{{Kind: "Stack", Name: "web"}}}, p); diff != "" {
		t.Errorf("protected(tier=db): -want, +got:\n%s", diff)
	}
}

// TestDiscoveryRetriesUnsyncedKinds: kind discovery, whose interval is an
// hour here, watches a kind whose informer had not synced at its first
// pass within seconds of the sync (unsyncedRetry), not an interval later:
// the informers start with the manager, so a new leader finds every kind
// unsynced at first, and a selector Lock's status waits for the watches.
func TestDiscoveryRetriesUnsyncedKinds(t *testing.T) {
	stack := stackKind // as fakeGroup's discovery serves it
	c := newMetadataCache(t)
	c.add(stack, false)
	w := newTargetWatches(c, newStartingController(), nil)
	d := &targetDiscovery{kinds: readmodel.NewKinds(fakeGroup()), watches: w, interval: time.Hour}
	watched := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		_, ok := w.watched[stack.Resource]
		return ok
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = d.Start(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	time.Sleep(1500 * time.Millisecond) // a pass or two, unsynced
	if watched() {
		t.Fatal("Stack watched before its informer synced")
	}
	c.informers[stack.GVK].synced.Store(true)
	start := time.Now()
	for !watched() {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("Stack not watched %s after its informer synced; want within about %s", time.Since(start).Round(time.Millisecond), unsyncedRetry)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("Stack watched %s after its informer synced", time.Since(start).Round(time.Millisecond))
}

// syncingClient is a client whose reads of a target come from a kind's
// informer, as controller-runtime's cache's do: a read waits for the
// informer to sync, and fails when it does not in time.
type syncingClient struct {
	client.Client
	informer *metadataInformer
}

func (c syncingClient) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if !c.informer.HasSynced() {
		// What controller-runtime's informer cache answers when a read's
		// context ends before the kind's informer syncs.
		return apierrors.NewTimeoutError("failed waiting for *v1.PartialObjectMetadata Informer to sync", 0)
	}
	got, ok, err := c.informer.indexer.GetByKey(key.String())
	if err != nil || !ok {
		return errors.Join(err, apierrors.NewNotFound(schema.GroupResource{}, key.Name))
	}
	got.(*metav1.PartialObjectMetadata).DeepCopyInto(obj.(*metav1.PartialObjectMetadata))
	return nil
}

// Patch writes nothing: the pass's writes are not what it is for.
func (syncingClient) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return nil
}

// Status writes nothing either.
func (syncingClient) Status() client.SubResourceWriter { return noStatus{} }

type noStatus struct{ client.SubResourceWriter }

func (noStatus) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return nil
}

// TestTargetPassWatchesSyncedKindsOnly: a target pass adds its kind's
// watch only once the kind's informer has synced (kindWatches: the source
// of a kind that never syncs would wait without end); until then its read
// times out, and the pass comes back after targetReadTimeout without an
// error (at a million objects a kind's first list loads for minutes: the
// error, with its stack trace, was logged hundreds of times a start).
func TestTargetPassWatchesSyncedKindsOnly(t *testing.T) {
	now := time.Now()
	clock := func() time.Time { return now }
	lock := lockv1alpha1.Lock{ObjectMeta: metav1.ObjectMeta{Namespace: "forge", Name: "keep"},
		Spec: lockv1alpha1.LockSpec{TargetRef: lockv1alpha1.TargetReference{APIVersion: "core.navique.com/v1alpha1", Kind: "Stack", Name: "forge"}}}
	c := newMetadataCache(t)
	c.add(stackKind, false, object("forge", "forge", nil))
	w := newTargetWatches(c, newStartingController(), nil)
	r := &reconciler{client: syncingClient{informer: c.informers[stackKind.GVK]}, locks: readmodeltest.Index(t, clock, lock),
		kinds: readmodel.NewKinds(fakeGroup()), watches: w, now: clock}
	target := lockv1alpha1.TargetKey{Namespace: "forge", Group: lockv1alpha1.Group, Kind: "Stack", Name: "forge"}
	if res, err := r.reconcileTarget(t.Context(), target); err != nil || res.RequeueAfter != targetReadTimeout {
		t.Errorf("a pass whose target's kind has not synced: %+v, %v; want it back after %v, without an error", res, err, targetReadTimeout)
	}
	if w.has(stackKind.Resource) {
		t.Fatal("Stack watched by a pass before its informer synced")
	}
	c.informers[stackKind.GVK].synced.Store(true)
	if _, err := r.reconcileTarget(t.Context(), target); err != nil {
		t.Errorf("a pass after the kind synced: %v", err)
	}
	if !w.has(stackKind.Resource) {
		t.Error("Stack not watched by a pass after its informer synced")
	}
}
