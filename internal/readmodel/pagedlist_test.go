package readmodel

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// pagingLW serves n objects' metadata as an API server without a watch
// cache does: at most opts.Limit a page, continued by the index of the
// next; it records each list's options. failAt fails the list of that
// page (counted from 1). Its watch refuses streamed lists (SendInitialEvents),
// as such an API server does, and otherwise never sends anything.
type pagingLW struct {
	n, failAt int
	calls     []metav1.ListOptions
}

func (p *pagingLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	p.calls = append(p.calls, opts)
	if len(p.calls) == p.failAt {
		return nil, errors.New("page failed")
	}
	from := 0
	if opts.Continue != "" {
		from, _ = strconv.Atoi(opts.Continue)
	}
	to := p.n
	if opts.Limit > 0 {
		to = min(p.n, from+int(opts.Limit))
	}
	list := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}}
	if to < p.n {
		list.Continue = strconv.Itoa(to)
	}
	for i := from; i < to; i++ {
		list.Items = append(list.Items, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: fmt.Sprintf("o%03d", i), UID: "u", ResourceVersion: "7",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		}})
	}
	return list, nil
}

func (p *pagingLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil {
		return nil, errors.New("sendInitialEvents: not supported without a watch cache")
	}
	return watch.NewFake(), nil
}

// names returns the names of objs, and fails t where one is not a *Meta.
func names(t *testing.T, objs []runtime.Object) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		m, ok := o.(*Meta)
		if !ok {
			t.Fatalf("listed a %T, want a *readmodel.Meta (the transform's)", o)
		}
		out = append(out, m.GetName())
	}
	return out
}

func wantNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("o%03d", i))
	}
	return out
}

// TestPagedListWatchPages: a list of 7 objects, 3 a page, is read in three
// requests, the first at the latest version where the reflector asked for
// any (resourceVersion 0, which a watch cache answers whole), the others
// continuing it; the answer holds every object, transformed, with the
// list's resource version and no continue token.
func TestPagedListWatchPages(t *testing.T) {
	src := &pagingLW{n: 7}
	lw := PagedListWatch(src, CacheTransform(nil), 3).(toolscache.ListerWatcherWithContext)
	got, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "0", Limit: 500, LabelSelector: "a=b"})
	if err != nil {
		t.Fatal(err)
	}
	want := []metav1.ListOptions{
		{Limit: 3, LabelSelector: "a=b"},
		{Limit: 3, LabelSelector: "a=b", Continue: "3"},
		{Limit: 3, LabelSelector: "a=b", Continue: "6"},
	}
	if diff := cmp.Diff(want, src.calls); diff != "" {
		t.Errorf("the pages' requests (-want +got):\n%s", diff)
	}
	items, err := meta.ExtractListWithAlloc(got)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantNames(7), names(t, items)); diff != "" {
		t.Errorf("listed (-want +got):\n%s", diff)
	}
	lm, err := meta.ListAccessor(got)
	if err != nil {
		t.Fatal(err)
	}
	if lm.GetResourceVersion() != "42" || lm.GetContinue() != "" {
		t.Errorf("list's resourceVersion %q and continue %q, want 42 and none", lm.GetResourceVersion(), lm.GetContinue())
	}
	if c := got.DeepCopyObject().(*TransformedList); len(c.Items) != 7 || c.ResourceVersion != "42" {
		t.Errorf("a deep copy has %d items at %q, want 7 at 42", len(c.Items), c.ResourceVersion)
	}
}

// TestPagedListWatchVersions: a list at a resource version of its own is
// paged at it (the first page only); one that continues another is passed
// through as it is.
func TestPagedListWatchVersions(t *testing.T) {
	src := &pagingLW{n: 4}
	lw := PagedListWatch(src, nil, 3).(toolscache.ListerWatcherWithContext)
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "40", ResourceVersionMatch: metav1.ResourceVersionMatchExact}); err != nil {
		t.Fatal(err)
	}
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{Limit: 2, Continue: "2"}); err != nil {
		t.Fatal(err)
	}
	want := []metav1.ListOptions{
		{Limit: 3, ResourceVersion: "40", ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		{Limit: 3, Continue: "3"},
		{Limit: 2, Continue: "2"},
	}
	if diff := cmp.Diff(want, src.calls); diff != "" {
		t.Errorf("the requests (-want +got):\n%s", diff)
	}
}

// TestPagedListWatchErrors: a page that fails, or an object the transform
// refuses or makes into something that is not an object, fails the whole
// list, and nothing of it is answered.
func TestPagedListWatchErrors(t *testing.T) {
	refuse := func(any) (any, error) { return nil, errors.New("refused") }
	notAnObject := func(any) (any, error) { return "a string", nil }
	for name, tc := range map[string]struct {
		failAt    int
		transform toolscache.TransformFunc
		want      string
	}{
		"second page fails": {failAt: 2, transform: CacheTransform(nil), want: "page failed"},
		"transform refuses": {transform: refuse, want: "transforming a listed object: refused"},
		"not an object":     {transform: notAnObject, want: "the transform made a string, not a runtime.Object, of a listed object"},
	} {
		t.Run(name, func(t *testing.T) {
			lw := PagedListWatch(&pagingLW{n: 7, failAt: tc.failAt}, tc.transform, 3).(toolscache.ListerWatcherWithContext)
			got, err := lw.ListWithContext(context.Background(), metav1.ListOptions{})
			if err == nil || err.Error() != tc.want || got != nil {
				t.Errorf("got %v, %v; want no list and error %q", got, err, tc.want)
			}
		})
	}
}

// TestPagedListWatchKeepsNoPage: an object the transform keeps as it is is
// a copy of its own, not an element of the page's array (which would keep
// the whole page for as long as the object is cached).
func TestPagedListWatchKeepsNoPage(t *testing.T) {
	page := &lockv1alpha1.LockList{Items: []lockv1alpha1.Lock{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}
	lw := PagedListWatch(&toolscache.ListWatch{ListFunc: func(metav1.ListOptions) (runtime.Object, error) { return page, nil }}, nil, 3)
	got, err := lw.List(metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	items := got.(*TransformedList).Items
	if len(items) != 1 || items[0] == &page.Items[0] {
		t.Fatalf("listed %v: want one Lock, a copy of the page's", items)
	}
}

// TestPagedListWatchKeepsStreamingSemantics: what the wrapped
// ListerWatcher says of streamed lists, PagedListWatch says too.
func TestPagedListWatchKeepsStreamingSemantics(t *testing.T) {
	if watchlist.DoesClientNotSupportWatchListSemantics(PagedListWatch(&scriptedLW{}, nil, 3)) {
		t.Error("a ListerWatcher that does not say it cannot stream lost its streamed lists")
	}
	if !watchlist.DoesClientNotSupportWatchListSemantics(PagedListWatch(&noStreamingLW{}, nil, 3)) {
		t.Error("a ListerWatcher that cannot stream says it can once paged")
	}
}

// TestPagedInformerSyncs: an informer of NewInformerFunc, whose API server
// streams no list, lists 1,234 objects a page at a time and keeps them
// all, as the cache's transform made them.
func TestPagedInformerSyncs(t *testing.T) {
	src := &pagingLW{n: 1234}
	inf := NewInformerFunc(CacheTransform(nil))(src, &metav1.PartialObjectMetadata{}, 0, toolscache.Indexers{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	var got []runtime.Object
	for _, o := range inf.GetStore().List() {
		got = append(got, o.(runtime.Object))
	}
	if len(got) != 1234 {
		t.Fatalf("the store keeps %d objects, want 1234", len(got))
	}
	names(t, got)
	lists := 0
	for _, c := range src.calls {
		if c.Limit != ListPageSize {
			t.Errorf("a list asked for %d objects, want pages of %d", c.Limit, ListPageSize)
		}
		lists++
	}
	if lists != 3 {
		t.Errorf("%d requests for 1,234 objects, want 3 pages", lists)
	}
}
