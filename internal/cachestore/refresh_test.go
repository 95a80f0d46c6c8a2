package cachestore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestRefreshNamespace: once the transform changes, RefreshNamespace
// stores again, transformed anew, the objects of one namespace the store
// holds at the version listed, telling the handlers of an update; it
// leaves the other namespaces, an object stored at another version or
// with another UID, and lists nothing for a namespace the store does not
// hold or an informer that has not run.
func TestRefreshNamespace(t *testing.T) {
	var gen atomic.Int32
	gen.Store(1)
	transform := func(obj any) (any, error) {
		o := obj.(*metav1.PartialObjectMetadata).DeepCopy()
		o.Labels = map[string]string{"gen": fmt.Sprint(gen.Load())}
		return o, nil
	}
	a := newAPIServer()
	fill(a, 70)
	idle := NewInformer(a, &metav1.PartialObjectMetadata{}, 0, storeIndexers())
	if err := idle.RefreshNamespace("ns-1"); err != nil || a.lists != 0 {
		t.Fatalf("refresh of an informer that has not run: %v, %d lists, want nil and none", err, a.lists)
	}

	inf := NewInformer(a, &metav1.PartialObjectMetadata{}, 0, storeIndexers())
	inf.pageSize = 3 // pages of one namespace's list
	if err := inf.SetTransform(transform); err != nil {
		t.Fatal(err)
	}
	rec := newRecorder()
	if _, err := inf.AddEventHandler(rec); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go inf.RunWithContext(ctx)
	eventually(t, a, inf.store, rec)
	rv := inf.store.LastStoreSyncResourceVersion()

	gen.Store(2)
	lists := a.lists
	if err := inf.RefreshNamespace("ns-9"); err != nil || a.lists != lists {
		t.Fatalf("refresh of a namespace the store does not hold: %v, %d lists, want nil and none", err, a.lists-lists)
	}
	// ns-1's obj-1 is stored at another UID (deleted and created again,
	// its events not delivered yet) and obj-8 at an older version: the
	// watch brings theirs.
	stale := map[string]func(*metav1.PartialObjectMetadata){
		"obj-1": func(o *metav1.PartialObjectMetadata) { o.UID = "other" },
		"obj-8": func(o *metav1.PartialObjectMetadata) { o.ResourceVersion = "1" },
	}
	for name, edit := range stale {
		stored, _, _ := inf.store.get("ns-1", name)
		o := stored.(*metav1.PartialObjectMetadata).DeepCopy()
		edit(o)
		inf.deliver.Lock()
		_ = inf.store.put(o, false, false)
		inf.deliver.Unlock()
	}
	if err := inf.RefreshNamespace("ns-1"); err != nil {
		t.Fatal(err)
	}
	if a.lists-lists != 4 {
		t.Errorf("ns-1's 10 objects in pages of 3: %d lists, want 4", a.lists-lists)
	}
	for _, obj := range inf.store.List() {
		o := obj.(metav1.Object)
		want := "1"
		if o.GetNamespace() == "ns-1" && stale[o.GetName()] == nil {
			want = "2"
		}
		if got := o.GetLabels()["gen"]; got != want {
			t.Errorf("%s/%s stored by transform %s, want %s", o.GetNamespace(), o.GetName(), got, want)
		}
		rec.mu.Lock()
		got := rec.objects[storeKey(o.GetNamespace(), o.GetName())]
		rec.mu.Unlock()
		if got != o {
			t.Errorf("the handler holds %s/%s as %v, the store as %v", o.GetNamespace(), o.GetName(), got, o)
		}
	}
	if got := inf.store.LastStoreSyncResourceVersion(); got != rv {
		t.Errorf("the store's resourceVersion after the refresh: %s, want %s (unchanged)", got, rv)
	}
	// The watch still goes on.
	a.put("ns-1", "obj-1", nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		stored, _, _ := inf.store.get("ns-1", "obj-1")
		if stored.(metav1.Object).GetLabels()["gen"] == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("obj-1's update not stored transformed anew")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
