package contract_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/metaslim"
)

// TestSlimMetadataOfARealAPIServer: through metaslim's transport (the
// cache's), a real API server's metadata-only list, streamed list and
// watch of Stacks read as they read without it, less what the cache's
// transform drops (managedFields, which the API server sends, above all).
func TestSlimMetadataOfARealAPIServer(t *testing.T) {
	inProcess(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := kube.NewNamespace(t, "slim")
	owner := kube.CreateObject(t, framework.StackGVK, ns, "owner")
	kube.CreateOwned(t, framework.StackGVK, ns, "owned", owner)
	gvr := framework.StackGVK.GroupVersion().WithResource("stacks")
	plain, err := metadata.NewForConfig(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	slim, err := metadata.NewForConfigAndClient(suite.env.Config, metaslim.Wrap(hc))
	if err != nil {
		t.Fatal(err)
	}

	want, err := plain.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range want.Items {
		if len(item.ManagedFields) == 0 {
			t.Fatalf("the API server sent %s without managedFields: nothing to check", item.Name)
		}
		if item.Name == "owned" && len(item.OwnerReferences) == 0 {
			t.Fatal("owned has no owner reference")
		}
	}
	got, err := slim.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantList := want.DeepCopy()
	for i := range wantList.Items {
		slimmed(&wantList.Items[i])
	}
	if d := cmp.Diff(wantList, got); d != "" {
		t.Errorf("the slimmed list (-want +got):\n%s", d)
	}

	// A watch from the list, and a change to a Stack.
	w, err := slim.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: want.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	changed, err := plain.Resource(gvr).Namespace(ns).Patch(ctx, "owned", types.MergePatchType, []byte(`{"metadata":{"labels":{"slim":"yes"}}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changed.TypeMeta = metav1.TypeMeta{}
	slimmed(changed)
	select {
	case ev := <-w.ResultChan():
		p, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if ev.Type != watch.Modified || !ok {
			t.Fatalf("the watch's event: %s %T", ev.Type, ev.Object)
		}
		p.TypeMeta = metav1.TypeMeta{}
		if d := cmp.Diff(changed, p); d != "" {
			t.Errorf("the slimmed watch event (-want +got):\n%s", d)
		}
	case <-ctx.Done():
		t.Fatal("no watch event")
	}

	// A streamed list, where the API server streams them (1.32 on).
	sw, err := slim.Resource(gvr).Namespace(ns).Watch(ctx, metav1.ListOptions{
		SendInitialEvents: new(true), ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true,
	})
	if apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) {
		t.Logf("the API server does not stream lists: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer sw.Stop()
	streamed := map[string]*metav1.PartialObjectMetadata{}
	for ev := range sw.ResultChan() {
		p, ok := ev.Object.(*metav1.PartialObjectMetadata)
		if !ok {
			t.Fatalf("the stream's event: %s %T", ev.Type, ev.Object)
		}
		if ev.Type == watch.Bookmark {
			break
		}
		p.TypeMeta = metav1.TypeMeta{}
		streamed[p.Name] = p
	}
	if d := cmp.Diff(changed, streamed["owned"]); d != "" {
		t.Errorf("the slimmed streamed Stack (-want +got):\n%s", d)
	}
	if s := streamed["owner"]; s == nil || len(s.ManagedFields) > 0 || s.UID != owner.GetUID() {
		t.Errorf("the streamed owner: %+v", s)
	}
}

// slimmed drops from p what metaslim drops.
func slimmed(p *metav1.PartialObjectMetadata) {
	p.GenerateName, p.SelfLink, p.Generation = "", "", 0
	p.CreationTimestamp, p.DeletionGracePeriodSeconds, p.ManagedFields = metav1.Time{}, nil, nil
	for i := range p.OwnerReferences {
		p.OwnerReferences[i].Controller, p.OwnerReferences[i].BlockOwnerDeletion = nil, nil
	}
}
