package contract_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/readmodel"
)

// TestPagedListOfARealAPIServer: the cache's list (readmodel.PagedListWatch)
// through a real API server's pages. 7 Stacks, 3 a page, listed as a
// reflector's first list asks (at any version), give what one list gives,
// each as the cache's transform makes it, at a resource version the API
// server watches from.
func TestPagedListOfARealAPIServer(t *testing.T) {
	inProcess(t)
	ctx := context.Background()
	ns := kube.NewNamespace(t, "paged")
	for i := range 7 {
		kube.CreateObject(t, framework.StackGVK, ns, fmt.Sprintf("stack-%d", i))
	}
	mc, err := metadata.NewForConfig(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	stacks := mc.Resource(framework.StackGVK.GroupVersion().WithResource("stacks")).Namespace(ns)
	pages := 0
	lw := readmodel.PagedListWatch(&toolscache.ListWatch{ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		pages++
		return stacks.List(ctx, opts)
	}}, readmodel.CacheTransform(nil), 3)
	got, err := lw.List(metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := stacks.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var gotNames, wantNames []string
	for _, o := range got.(*readmodel.TransformedList).Items {
		m, ok := o.(*readmodel.Meta)
		if !ok {
			t.Fatalf("listed a %T, want a *readmodel.Meta", o)
		}
		gotNames = append(gotNames, m.GetName())
	}
	for _, o := range want.Items {
		wantNames = append(wantNames, o.Name)
	}
	slices.Sort(gotNames)
	if diff := cmp.Diff(wantNames, gotNames); diff != "" || len(gotNames) != 7 {
		t.Errorf("paged list (-one list +paged):\n%s", diff)
	}
	if pages != 3 {
		t.Errorf("%d requests for 7 Stacks 3 a page, want 3", pages)
	}
	rv := got.(*readmodel.TransformedList).ResourceVersion
	w, err := stacks.Watch(ctx, metav1.ListOptions{ResourceVersion: rv})
	if err != nil {
		t.Fatalf("watch from the paged list's resource version %q: %v", rv, err)
	}
	w.Stop()
}
