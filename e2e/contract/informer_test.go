package contract_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/metadata"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/navique/lockguard/e2e/framework"
	"github.com/navique/lockguard/internal/cachestore"
	"github.com/navique/lockguard/internal/readmodel"
)

// TestInformerOfARealAPIServer: the cache's informer (cachestore.Informer)
// of a real API server's Stacks, its first list streamed (1.32 on), and
// listed 3 a page: either way it syncs with the 7 Stacks one list gives,
// each as the cache's transform makes it, and its watch, from the list's
// resource version, brings a Stack created and one deleted after.
func TestInformerOfARealAPIServer(t *testing.T) {
	inProcess(t)
	ctx := context.Background()
	mc, err := metadata.NewForConfig(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		stream bool
	}{{"streamed", true}, {"listed 3 a page", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ns := kube.NewNamespace(t, "informer")
			for i := range 7 {
				kube.CreateObject(t, framework.StackGVK, ns, fmt.Sprintf("stack-%d", i))
			}
			stacks := mc.Resource(framework.StackGVK.GroupVersion().WithResource("stacks")).Namespace(ns)
			lists, streams := 0, 0
			inf := cachestore.NewInformer(&toolscache.ListWatch{
				ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
					lists++
					return stacks.List(ctx, opts)
				},
				WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
					if opts.SendInitialEvents != nil {
						streams++
					}
					opts.Watch = true
					return stacks.Watch(ctx, opts)
				},
			}, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
			if err := inf.SetTransform(readmodel.CacheTransform(nil, nil)); err != nil {
				t.Fatal(err)
			}
			if err := inf.SetPaging(3, tc.stream); err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			go inf.RunWithContext(runCtx)
			if !toolscache.WaitForCacheSync(runCtx.Done(), inf.HasSynced) {
				t.Fatal("the informer did not sync")
			}
			want, err := stacks.List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var wantNames []string
			for _, o := range want.Items {
				wantNames = append(wantNames, o.Name)
			}
			if diff := cmp.Diff(wantNames, storedNames(t, inf)); diff != "" || len(wantNames) != 7 {
				t.Errorf("synced (-one list +the informer's store):\n%s", diff)
			}
			// Kubernetes 1.32 on streams lists; an API server before it
			// refuses the stream, and the informer lists 3 a page.
			wantStreams, wantLists := 0, 3
			if tc.stream {
				wantStreams = 1
				if streamsLists(t) {
					wantLists = 0
				}
			}
			if streams != wantStreams || lists != wantLists {
				t.Errorf("%d streams asked for and %d list requests for 7 Stacks 3 a page, want %d and %d", streams, lists, wantStreams, wantLists)
			}
			kube.CreateObject(t, framework.StackGVK, ns, "later")
			if err := stacks.Delete(ctx, "stack-0", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			wantNames = append(slices.Clone(wantNames[1:]), "later")
			slices.Sort(wantNames)
			framework.Eventually(t, 30*time.Second, "the watch brings a create and a delete", func(context.Context) error {
				if diff := cmp.Diff(wantNames, storedNames(t, inf)); diff != "" {
					return fmt.Errorf("(-the API server +the informer's store):\n%s", diff)
				}
				return nil
			})
		})
	}
}

// streamsLists reports whether the API server streams lists: Kubernetes
// 1.32 on (WatchList on by default).
func streamsLists(t *testing.T) bool {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(suite.env.Config)
	if err != nil {
		t.Fatal(err)
	}
	v, err := dc.ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := version.ParseGeneric(v.GitVersion)
	if err != nil {
		t.Fatalf("the API server's version %q: %v", v.GitVersion, err)
	}
	return parsed.AtLeast(version.MajorMinor(1, 32))
}

// storedNames returns the names of inf's objects, sorted; each must be
// the cache transform's *readmodel.Meta.
func storedNames(t *testing.T, inf *cachestore.Informer) []string {
	t.Helper()
	var names []string
	for _, o := range inf.GetStore().List() {
		m, ok := o.(*readmodel.Meta)
		if !ok {
			t.Fatalf("stored a %T, want a *readmodel.Meta", o)
		}
		names = append(names, m.GetName())
	}
	slices.Sort(names)
	return names
}
