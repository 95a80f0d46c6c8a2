package controller

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
	"github.com/navique/lockguard/internal/readmodel"
)

// TestRemoveNamespaceLabel: the namespace label of a namespace without
// live Locks goes, with its pending mark, unless a Lock create is pending
// (the peer protocol) or, without the peer protocol, marked it less than
// ProtectedPendingGrace ago; and a create admitted between the read and
// the removal (a new mark written) is not undone: the removal is made at
// the resourceVersion read, the API server refuses it, and the namespace
// is looked at again within conflictRecheck. Before, the
// removal was a plain merge patch, and a Lock create's label written in
// that moment (a no-op then, the label being there) went with it: the
// namespace's delete no longer reached lockguard.
func TestRemoveNamespaceLabel(t *testing.T) {
	now := time.Date(2026, 12, 4, 9, 0, 0, 0, time.UTC)
	labelled := func(mark string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "prod", Labels: map[string]string{lockv1alpha1.HasLocksLabel: "true", "team": "a"}}}
		if mark != "" {
			n.Annotations = map[string]string{lockv1alpha1.HasLocksPendingAnnotation: mark}
		}
		return n
	}
	fresh := now.Add(-20 * time.Second).Format(time.RFC3339)
	old := now.Add(-2 * lockv1alpha1.ProtectedPendingGrace).Format(time.RFC3339)
	cases := map[string]struct {
		ns        *corev1.Namespace
		pending   PendingLocks // nil: no peer protocol
		race      bool         // a Lock create marks the namespace after the pass read it
		wantLabel bool
		wantAfter time.Duration
	}{
		"Stale":          {ns: labelled(""), wantLabel: false},
		"FreshMark":      {ns: labelled(fresh), wantLabel: true, wantAfter: lockv1alpha1.ProtectedPendingGrace - 20*time.Second},
		"OldMark":        {ns: labelled(old), wantLabel: false},
		"CreateRace":     {ns: labelled(old), race: true, wantLabel: true, wantAfter: conflictRecheck},
		"PeersFreshMark": {ns: labelled(fresh), pending: pendingIn(false), wantLabel: false},
		"PeersPending":   {ns: labelled(fresh), pending: pendingIn(true), wantLabel: true, wantAfter: pendingRecheck},
		"PeersRace":      {ns: labelled(fresh), pending: pendingIn(false), race: true, wantLabel: true, wantAfter: conflictRecheck},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := fake.NewClientBuilder().WithScheme(clusterLockScheme(t)).WithObjects(tc.ns).Build()
			obj := NamespaceObject("prod")
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatal(err)
			}
			if tc.race {
				// The create's write (webhook.NamespaceLabel), after the read.
				if err := c.Patch(context.Background(), NamespaceObject("prod"), client.RawPatch(types.MergePatchType,
					lockv1alpha1.PendingMarkPatch(lockv1alpha1.HasLocksLabel, lockv1alpha1.HasLocksPendingAnnotation, now))); err != nil {
					t.Fatal(err)
				}
			}
			r := &reconciler{client: c, pending: tc.pending, now: func() time.Time { return now }}
			after, err := r.removeNamespaceLabel(context.Background(), obj)
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Namespace
			if err := c.Get(context.Background(), client.ObjectKey{Name: "prod"}, &got); err != nil {
				t.Fatal(err)
			}
			_, mark := got.Annotations[lockv1alpha1.HasLocksPendingAnnotation]
			if has := got.Labels[lockv1alpha1.HasLocksLabel] == "true"; has != tc.wantLabel || mark != tc.wantLabel || got.Labels["team"] != "a" {
				t.Errorf("labels %v, annotations %v; want the label and mark kept %t, the other labels kept", got.Labels, got.Annotations, tc.wantLabel)
			}
			if after != tc.wantAfter {
				t.Errorf("look again after %s; want %s", after, tc.wantAfter)
			}
		})
	}
}

// pendingIn is a PendingLocks that says pending for every namespace, or
// for none.
type pendingIn bool

func (p pendingIn) PendingIn(string) bool { return bool(p) }

// TestHasLocksLabelChanged: the Lock controller's namespace watch takes
// the namespace updates that change HasLocksLabel, not those that change
// only the labels the cache keeps for selector ClusterLocks.
func TestHasLocksLabelChanged(t *testing.T) {
	ns := func(l map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "forge", Labels: l}}
	}
	on := map[string]string{lockv1alpha1.HasLocksLabel: "true"}
	for _, tc := range []struct {
		old, new map[string]string
		want     bool
	}{
		{nil, on, true},
		{on, nil, true},
		{on, map[string]string{lockv1alpha1.HasLocksLabel: "true", "tier": "prod"}, false},
		{map[string]string{"tier": "dev"}, map[string]string{"tier": "prod"}, false},
	} {
		if got := hasLocksLabelChanged.Update(event.TypedUpdateEvent[*metav1.PartialObjectMetadata]{ObjectOld: ns(tc.old), ObjectNew: ns(tc.new)}); got != tc.want {
			t.Errorf("labels %v -> %v: %t; want %t", tc.old, tc.new, got, tc.want)
		}
	}
	if !hasLocksLabelChanged.Create(event.TypedCreateEvent[*metav1.PartialObjectMetadata]{Object: ns(nil)}) {
		t.Error("a namespace create is dropped; want it passed")
	}
}

// syncedStore is a namespaceStore whose informer has synced.
type syncedStore struct{ toolscache.Indexer }

func (syncedStore) HasSynced() bool                  { return true }
func (s syncedStore) GetIndexer() toolscache.Indexer { return s.Indexer }

// TestNamespaceLabelReadsAgree: a target's pass reads its namespace's
// label from the informer's store, without a copy, once it has synced;
// the same as through the cached client, for a labelled namespace, one
// without the label, one terminating and one that is not there.
func TestNamespaceLabelReadsAgree(t *testing.T) {
	gone := metav1.NewTime(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	namespaces := []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "labelled", Labels: map[string]string{lockv1alpha1.HasLocksLabel: "true", "team": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "bare", Labels: map[string]string{"team": "a"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "ending", Labels: map[string]string{lockv1alpha1.HasLocksLabel: "true"},
			DeletionTimestamp: &gone, Finalizers: []string{"kubernetes"}}},
	}
	type read struct{ has, terminating, found bool }
	want := map[string]read{"labelled": {true, false, true}, "bare": {false, false, true}, "ending": {true, true, true}, "missing": {}}
	builder := fake.NewClientBuilder().WithScheme(clusterLockScheme(t))
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, nil)
	transform := readmodel.CacheTransform(nil, readmodel.NewLabelKeys())
	for _, ns := range namespaces {
		builder = builder.WithObjects(ns)
		p := NamespaceObject(ns.Name)
		p.ObjectMeta = *ns.ObjectMeta.DeepCopy()
		cached, err := transform(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Add(cached); err != nil {
			t.Fatal(err)
		}
	}
	c := builder.Build()
	readers := map[string]*reconciler{"client": {client: c}, "store": {client: c, namespaces: syncedStore{store}}}
	for name, w := range want {
		for by, r := range readers {
			has, terminating, found, err := r.namespaceLabel(context.Background(), name)
			if got := (read{has, terminating, found}); err != nil || got != w {
				t.Errorf("namespaceLabel(%q) read through the %s: %+v, %v; want %+v", name, by, got, err, w)
			}
		}
	}
}
