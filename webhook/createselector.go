package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// A selector Lock's objects of opted-in kinds, at its create
// (docs/optin.md; docs/contract.md rules 15 and 21): as a targetRef Lock's
// target, each object of an opted-in kind that an enforcing selector Lock
// covers when its create is admitted gets ProtectedLabel (and
// ProtectedPendingAnnotation) before the create is allowed, so that a
// delete sent the moment the create returns reaches lockguard through the
// chart's protect-locked entry even in a namespace whose HasLocksLabel the
// API server's namespace cache does not show yet (the namespace's first
// Lock). The candidates are listed live from the API server (metadata
// only, the selector's label selector, per opted-in kind the selector's
// kinds name: Lock.SelectorOptedInKinds), kept when the Lock covers them
// (Lock.Covers, the rule every guard and the reconciler use), and labelled
// by the same TargetLabeler as a targetRef Lock's target. At most
// SelectorLabelCap objects: past it the create is refused
// (SelectorCapMessage). Objects created or relabelled into the selector
// after the create are labelled by the reconciler when it sees them.

// SelectorLabelCap is the most objects of opted-in kinds that a selector
// Lock's create labels before it is allowed: the create of one whose
// selector matches more is refused (SelectorCapMessage), so that the
// admission's writes stay within the webhook's timeout.
const SelectorLabelCap = 500

// selectorLabelWorkers is how many of those labels are written at once.
const selectorLabelWorkers = 8

// SelectedLister lists the objects of an opted-in kind that a selector
// matches, as the API server has them (never a cache: the objects a create
// must label are those stored as it is admitted).
type SelectedLister interface {
	// ListSelected returns at most limit objects of kind gk in namespace ns
	// whose labels match sel, and whether the API server holds more. It
	// returns none for a kind that is not opted in.
	ListSelected(ctx context.Context, ns string, gk schema.GroupKind, sel labels.Selector, limit int64) ([]Selected, bool, error)
}

// Selected is an object a selector Lock's create lists: what the rule
// reads of it (lockv1alpha1.Object), and its pending mark
// (ProtectedPendingAnnotation: the time and Lock of the create that last
// labelled it), so that a create retried after a refusal does not label
// again what its refused attempt labelled (selectedObjects).
type Selected struct {
	lockv1alpha1.Object
	Mark string
}

// SelectedListerFunc adapts a function to a SelectedLister.
type SelectedListerFunc func(ctx context.Context, ns string, gk schema.GroupKind, sel labels.Selector, limit int64) ([]Selected, bool, error)

// ListSelected calls f.
func (f SelectedListerFunc) ListSelected(ctx context.Context, ns string, gk schema.GroupKind, sel labels.Selector, limit int64) ([]Selected, bool, error) {
	return f(ctx, ns, gk, sel, limit)
}

// OptedInObjects returns the SelectedLister that resolves a kind with
// optedIn (as ProtectedTargetLabel does) and lists the objects' metadata
// through r (in lockguard, the manager's API reader): one list call, with
// the label selector and the limit.
func OptedInObjects(optedIn OptedInResolver, r client.Reader) SelectedLister {
	return SelectedListerFunc(func(ctx context.Context, ns string, gk schema.GroupKind, sel labels.Selector, limit int64) ([]Selected, bool, error) {
		if gk.Group == lockv1alpha1.Group {
			return nil, false, nil
		}
		gvk, ok, err := optedIn(gk)
		if err != nil {
			return nil, false, fmt.Errorf("resolving the kind %s: %w", gk, err)
		}
		if !ok {
			return nil, false, nil
		}
		var out []Selected
		next := ""
		for {
			// A page may hold fewer than its limit and a continue token:
			// read on until limit objects or the last page.
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
			if err := r.List(ctx, list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel},
				client.Limit(limit-int64(len(out))), client.Continue(next)); err != nil {
				return nil, false, fmt.Errorf("listing the %s objects of namespace %s that the selector matches: %w", gk, ns, err)
			}
			for _, o := range list.Items {
				out = append(out, Selected{Object: lockv1alpha1.Object{Namespace: o.Namespace, Group: gk.Group, Kind: gk.Kind, Name: o.Name, Labels: o.Labels},
					Mark: o.Annotations[lockv1alpha1.ProtectedPendingAnnotation]})
			}
			if next = list.Continue; next == "" || int64(len(out)) >= limit {
				return out, next != "", nil
			}
		}
	})
}

// SelectorCapMessage is lockguard's refusal of the create of selector Lock
// l, whose selector matches more than SelectorLabelCap objects of the
// opted-in kinds (kinds) in its namespace.
func SelectorCapMessage(l *lockv1alpha1.Lock, kinds []schema.GroupKind) string {
	names := make([]string, 0, len(kinds))
	for _, gk := range kinds {
		names = append(names, gk.String())
	}
	return fmt.Sprintf("the Lock was not created: its selector matches more than %d objects of %s in namespace %s, and lockguard labels each %s=true before allowing a selector Lock's create, %d at most (docs/optin.md): narrow the selector, or split it into Locks that each match at most %d",
		SelectorLabelCap, strings.Join(names, ", "), l.Namespace, lockv1alpha1.ProtectedLabel, SelectorLabelCap, SelectorLabelCap)
}

// selectedObjects returns the objects of opted-in kinds that selector
// Lock l, enforcing at now, covers, for c's Targets to label (the package
// comment above); or the refusal of the create: retryable when they
// cannot be listed, final past SelectorLabelCap. An object labelled by an
// attempt of the same create a moment ago (labelledBefore) is counted,
// not labelled again: a create refused because its writes outran the
// webhook's timeout (a busy API server) gets further with each retry.
func (c *CreateHandler) selectedObjects(ctx context.Context, l *lockv1alpha1.Lock, now time.Time) ([]lockv1alpha1.TargetKey, *admission.Response) {
	kinds := l.SelectorOptedInKinds(now)
	if len(kinds) == 0 {
		return nil, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(l.Spec.Selector.LabelSelector())
	if err != nil {
		// Standing validated it: a review of any other is forged.
		resp := errored(http.StatusBadRequest, fmt.Errorf("lockguard could not read the Lock's selector: %w", err))
		return nil, &resp
	}
	var keys []lockv1alpha1.TargetKey
	covered := 0
	for _, gk := range kinds {
		objs, more, err := c.o.Selected.ListSelected(ctx, l.Namespace, gk, sel, int64(SelectorLabelCap+1-covered))
		if err != nil {
			resp := errored(http.StatusServiceUnavailable, fmt.Errorf("%s: %w", TargetLabelRefusedRetry, err))
			return nil, &resp
		}
		for _, o := range objs {
			if !l.Covers(o.Object, now) {
				continue
			}
			covered++
			if !labelledBefore(o, l.Name, now) {
				keys = append(keys, o.Key())
			}
		}
		if more || covered > SelectorLabelCap {
			resp := admission.Denied(SelectorCapMessage(l, kinds))
			return nil, &resp
		}
	}
	return keys, nil
}

// labelledBefore reports whether o carries ProtectedLabel and a pending
// mark that a create of the Lock named lock wrote within the last half of
// ProtectedPendingGrace (before now): the mark then keeps the label for
// at least half the grace more, as long as a new one would (a Lock
// admitted is cached within seconds), and writing it again is a write for
// nothing.
func labelledBefore(o Selected, lock string, now time.Time) bool {
	return o.Labels[lockv1alpha1.ProtectedLabel] == "true" && lockv1alpha1.PendingBy(o.Mark) == lock &&
		lockv1alpha1.PendingLeft(o.Mark, lockv1alpha1.ProtectedPendingGrace, now) >= lockv1alpha1.ProtectedPendingGrace/2
}

// labelAll labels each of keys with c's Targets, selectorLabelWorkers at
// a time (labelEach); an object gone meanwhile (NotFound) needs no label.
// It returns the writes' errors, joined.
func (c *CreateHandler) labelAll(ctx context.Context, keys []lockv1alpha1.TargetKey, by string) error {
	var errs []error
	for _, f := range labelEach(keys, selectorLabelWorkers, func(key lockv1alpha1.TargetKey) error { return c.o.Targets.LabelTarget(ctx, key, by) }) {
		errs = append(errs, f.err)
	}
	return errors.Join(errs...)
}

// keyError is a label write of labelEach that failed.
type keyError struct {
	key lockv1alpha1.TargetKey
	err error
}

// labelEach calls label on each of keys, workers at a time, and returns
// the calls that failed, in no order; a NotFound error (the object gone
// meanwhile: it needs no label) is no failure. The one pool of the label
// writes a create admits (a selector Lock's, labelAll; a selector
// ClusterLock's, labelSelected).
func labelEach(keys []lockv1alpha1.TargetKey, workers int, label func(lockv1alpha1.TargetKey) error) []keyError {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []keyError
		next   = make(chan lockv1alpha1.TargetKey)
	)
	for range min(workers, len(keys)) {
		wg.Go(func() {
			for key := range next {
				if err := label(key); err != nil && !apierrors.IsNotFound(err) {
					mu.Lock()
					failed = append(failed, keyError{key, err})
					mu.Unlock()
				}
			}
		})
	}
	for _, key := range keys {
		next <- key
	}
	close(next)
	wg.Wait()
	return failed
}
