package readmodel

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// ListPageSize is how many objects a cache's list asks the API server for
// at a time (PagedListWatch): client-go's pager's default.
const ListPageSize = 500

// PagedListWatch returns lw whose list is read pageSize objects a request,
// each page's objects transformed (transform; nil keeps them) as the page
// arrives, and answered as one list of the transformed objects, with the
// resource version of the list's snapshot. Its watch is lw's.
//
// A reflector lists before it watches, on its start and whenever its
// watch cannot resume, and it keeps the whole list until its store has it:
// at a million objects, as decoded (managedFields and all), several times
// what the cache keeps of them (issue 38). client-go's own pager collects
// the decoded pages, and a list "at any resource version" (the reflector's
// first, resourceVersion 0) is answered whole from the API server's watch
// cache, which ignores its limit. So that a page at a time is all there is
// of the decoded objects, such a list is read as a list of the most recent
// version (resourceVersion unset: page by page, consistent), which is never
// older than what was asked for.
//
// Where the API server streams initial lists (WatchList, which client-go's
// reflector prefers) the reflector does not list: it transforms each
// object as it arrives. The list here serves the API servers that do not
// stream (WatchList is off by default before 1.32) and a stream that
// failed. Streaming is kept where it is served: listing instead (run AA,
// benchmarks.md section 9, 100,000 Locks and a million objects on 1.37)
// peaked no lower and took 2.5 minutes longer to load them from etcd.
func PagedListWatch(lw toolscache.ListerWatcher, transform toolscache.TransformFunc, pageSize int64) toolscache.ListerWatcher {
	p := &pagedLW{ListerWatcherWithContext: toolscache.ToListerWatcherWithContext(lw), transform: transform, pageSize: pageSize}
	if w, ok := lw.(watchListSemantics); ok {
		return &pagedLWSemantics{pagedLW: p, semantics: w}
	}
	return p
}

// pagedLW is PagedListWatch's ListerWatcher.
type pagedLW struct {
	toolscache.ListerWatcherWithContext
	transform toolscache.TransformFunc
	pageSize  int64
}

// pagedLWSemantics is a pagedLW that keeps what the wrapped ListerWatcher
// says of streamed lists.
type pagedLWSemantics struct {
	*pagedLW
	semantics watchListSemantics
}

// IsWatchListSemanticsUnSupported reports what the wrapped ListerWatcher does.
func (p *pagedLWSemantics) IsWatchListSemanticsUnSupported() bool {
	return p.semantics.IsWatchListSemanticsUnSupported()
}

// List is ListWithContext without a context.
//
// Deprecated: the reflector calls ListWithContext.
func (p *pagedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return p.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context.
//
// Deprecated: the reflector calls WatchWithContext.
func (p *pagedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return p.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists page by page; see PagedListWatch. A list that
// continues one (opts.Continue) is passed through as it is. An error of
// any page is returned as it is, and nothing of the list: a continue token
// that expired is the reflector's 410 Expired, on which it lists again.
func (p *pagedLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	if opts.Continue != "" {
		return p.ListerWatcherWithContext.ListWithContext(ctx, opts)
	}
	opts.Limit = p.pageSize
	if opts.ResourceVersion == "0" {
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
	out := &TransformedList{}
	for {
		page, err := p.ListerWatcherWithContext.ListWithContext(ctx, opts)
		if err != nil {
			return nil, err
		}
		lm, err := meta.ListAccessor(page)
		if err != nil {
			return nil, fmt.Errorf("a page of the list: %w", err)
		}
		if out.ResourceVersion == "" {
			out.ResourceVersion = lm.GetResourceVersion()
		}
		// Each item a copy of its own (WithAlloc), so that what the
		// transform returns unchanged does not hold the page's array.
		if err := meta.EachListItemWithAlloc(page, func(o runtime.Object) error {
			t, err := p.apply(o)
			if err != nil {
				return err
			}
			out.Items = append(out.Items, t)
			return nil
		}); err != nil {
			return nil, err
		}
		if opts.Continue = lm.GetContinue(); opts.Continue == "" {
			return out, nil
		}
		// A continued list reads the first page's snapshot: it may not
		// name a resource version of its own.
		opts.ResourceVersion, opts.ResourceVersionMatch = "", ""
	}
}

// apply transforms o, which must stay a runtime.Object.
func (p *pagedLW) apply(o runtime.Object) (runtime.Object, error) {
	if p.transform == nil {
		return o, nil
	}
	t, err := p.transform(o)
	if err != nil {
		return nil, fmt.Errorf("transforming a listed object: %w", err)
	}
	obj, ok := t.(runtime.Object)
	if !ok {
		return nil, fmt.Errorf("the transform made a %T, not a runtime.Object, of a listed object", t)
	}
	return obj, nil
}

// TransformedList is the list PagedListWatch answers: the listed objects
// as the cache's transform made them, which need not be of one type.
type TransformedList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []runtime.Object
}

// GetObjectKind returns the list's (empty) kind.
func (l *TransformedList) GetObjectKind() schema.ObjectKind { return &l.TypeMeta }

// DeepCopyObject copies the list and its items.
func (l *TransformedList) DeepCopyObject() runtime.Object {
	c := &TransformedList{TypeMeta: l.TypeMeta, Items: make([]runtime.Object, len(l.Items))}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	for i, o := range l.Items {
		c.Items[i] = o.DeepCopyObject()
	}
	return c
}
