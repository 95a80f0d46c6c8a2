package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	lockv1alpha1 "github.com/navique/lockguard/api/v1alpha1"
)

// fakeAPI is an API server for the guards: Locks, and the names of the
// objects of each kind by namespace (true: not being deleted). It serves
// one item per page, so that every list is paged.
type fakeAPI struct {
	locks   []lockv1alpha1.Lock
	objects map[schema.GroupKind]map[string]map[string]bool
	err     error
	lists   map[string]int               // the metadata lists served, by namespace
	labels  map[string]map[string]string // objects' labels, by "namespace/name"
	// gone are the kinds whose lists are NotFound: served no more (a CRD
	// just deleted), though the RESTMapper still maps them.
	gone map[schema.GroupKind]bool
}

func (a *fakeAPI) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if a.err != nil {
		return a.err
	}
	o := (&client.ListOptions{}).ApplyOptions(opts)
	var next int
	if o.Continue != "" {
		fmt.Sscan(o.Continue, &next)
	}
	page := func(n int) (int, string) {
		if next+1 < n {
			return next, fmt.Sprint(next + 1)
		}
		return next, ""
	}
	switch l := list.(type) {
	case *lockv1alpha1.LockList:
		var in []lockv1alpha1.Lock
		for _, lk := range a.locks {
			if o.Namespace == "" || lk.Namespace == o.Namespace {
				in = append(in, lk)
			}
		}
		if len(in) == 0 {
			return nil
		}
		i, cont := page(len(in))
		l.Items, l.Continue = in[i:i+1], cont
	case *metav1.PartialObjectMetadataList:
		if a.lists == nil {
			a.lists = map[string]int{}
		}
		a.lists[o.Namespace]++
		gk := schema.GroupKind{Group: l.GroupVersionKind().Group, Kind: strings.TrimSuffix(l.GroupVersionKind().Kind, "List")}
		if a.gone[gk] {
			return apierrors.NewNotFound(schema.GroupResource{Group: gk.Group, Resource: strings.ToLower(gk.Kind) + "s"}, "")
		}
		var in []metav1.PartialObjectMetadata
		for name, alive := range a.objects[gk][o.Namespace] {
			obj := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: a.labels[o.Namespace+"/"+name]}}
			if !alive {
				obj.DeletionTimestamp = &metav1.Time{}
			}
			in = append(in, obj)
		}
		slices.SortFunc(in, func(a, b metav1.PartialObjectMetadata) int { return strings.Compare(a.Name, b.Name) })
		if len(in) == 0 {
			return nil
		}
		i, cont := page(len(in))
		l.Items, l.Continue = in[i:i+1], cont
	default:
		return fmt.Errorf("unexpected list %T", list)
	}
	return nil
}

var (
	stackGK  = schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Stack"}
	widgetGK = schema.GroupKind{Group: lockv1alpha1.Group, Kind: "Widget"}
)

// guardMapper serves Stack and Widget (namespaced) and Region
// (cluster-scoped) in core.navique.com.
func guardMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{{Group: lockv1alpha1.Group, Version: "v1alpha1"}, {Group: lockv1alpha1.Group, Version: "v1"}})
	m.Add(stackGK.WithVersion("v1alpha1"), meta.RESTScopeNamespace)
	m.Add(widgetGK.WithVersion("v1"), meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Group: lockv1alpha1.Group, Version: "v1alpha1", Kind: "Region"}, meta.RESTScopeRoot)
	return m
}

func guardLock(ns, name, kind, target, reason string) lockv1alpha1.Lock {
	return *newLockWithReason(ns, name, kind, target, reason)
}

func newLockWithReason(ns, name, kind, target, reason string) *lockv1alpha1.Lock {
	l := newLock(ns, name, lockv1alpha1.GroupVersion.String(), kind, target)
	l.Spec.Reason = reason
	return l
}

// reported returns l with the status the reconciler writes for reason.
func reported(l lockv1alpha1.Lock, reason string) lockv1alpha1.Lock {
	status := metav1.ConditionFalse
	if reason == lockv1alpha1.ReasonActive {
		status, l.Status.Active = metav1.ConditionTrue, true
	}
	l.Status.Conditions = []metav1.Condition{{Type: lockv1alpha1.ConditionReady, Status: status, Reason: reason}}
	return l
}

func deleting(l lockv1alpha1.Lock) lockv1alpha1.Lock {
	l.DeletionTimestamp = &metav1.Time{}
	return l
}

func namespaceRequest(name string) Request {
	r := Request{Operation: admissionv1.Delete, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: name}
	r.OldObject.Metadata.Name = name
	r.OldObject.Status.Phase = "Active"
	return r
}

func crdRequest(group, kind string) Request {
	name := strings.ToLower(kind) + "s." + group
	r := Request{Operation: admissionv1.Delete, Kind: metav1.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, Name: name}
	r.OldObject.Metadata.Name = name
	r.OldObject.Spec = ObjectSpec{Group: group, Names: SpecNames{Kind: kind}}
	return r
}

// guardResult is what the guard tests compare of a response.
type guardResult struct {
	Result   result
	Warnings []string
}

func TestGuards(t *testing.T) {
	const nsDenied = "namespace is protected by Lock(s) "
	const nsTail = "; delete the Lock(s) before deleting this namespace "
	const crdDenied = "customresourcedefinition is protected by Lock(s) "
	const crdTail = "; delete the Lock(s) before deleting this CustomResourceDefinition "
	objects := map[schema.GroupKind]map[string]map[string]bool{
		stackGK:  {"forge": {"forge": true, "going": false}},
		widgetGK: {"forge": {"w1": true}, "edge": {"w2": true}},
	}
	many := &fakeAPI{objects: map[schema.GroupKind]map[string]map[string]bool{stackGK: {"big": {}}}}
	for i := range 15 {
		name := fmt.Sprintf("s%02d", i)
		many.objects[stackGK]["big"][name] = true
		many.locks = append(many.locks, guardLock("big", "lock-"+name, "Stack", name, strings.Repeat("x", 200)))
	}
	spread := &fakeAPI{objects: map[schema.GroupKind]map[string]map[string]bool{widgetGK: {}}}
	var spreadCache []lockv1alpha1.Lock
	for i := range 12 {
		ns := fmt.Sprintf("t%02d", i)
		spread.objects[widgetGK][ns] = map[string]bool{"w": true}
		spreadCache = append(spreadCache, guardLock(ns, "keep", "Widget", "w", ""))
	}
	var spreadDescription []string
	for i := range 10 {
		spreadDescription = append(spreadDescription, fmt.Sprintf("t%02d/keep: Widget/w", i))
	}
	terminating := namespaceRequest("forge")
	terminating.OldObject.Status.Phase = "Terminating"
	dryRun := namespaceRequest("forge")
	dryRun.DryRun = true
	deletecollection := crdRequest(lockv1alpha1.Group, "Widget")
	deletecollection.Name = ""

	cases := map[string]struct {
		reason string
		api    *fakeAPI
		cache  []lockv1alpha1.Lock // the Lock cache's live Locks
		req    Request
		want   guardResult
	}{
		"NamespaceFromCache": {
			reason: "A Lock the cache has denies, its target read from the API server (whose Lock list is not needed).",
			api:    &fakeAPI{objects: objects},
			cache:  []lockv1alpha1.Lock{guardLock("forge", "keep", "Stack", "forge", ""), guardLock("other", "elsewhere", "Stack", "forge", "")},
			req:    namespaceRequest("forge"),
			want:   guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied + "[keep]" + nsTail + "(keep: Stack/forge)"}},
		},
		"NamespaceCacheLags": {
			reason: "A Lock the cache has not seen yet still denies: what the cache would allow is confirmed with the API server's Locks.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{guardLock("forge", "new", "Stack", "forge", "")}},
			cache:  []lockv1alpha1.Lock{guardLock("forge", "gone", "Stack", "absent", "")},
			req:    namespaceRequest("forge"),
			want:   guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied + "[new]" + nsTail + "(new: Stack/forge)"}},
		},
		"NamespaceAuditOnly": {
			reason: "A Lock in Audit enforcement on an existing object refuses nothing: not the namespace's delete (docs/contract.md rule 20), from the cache or the API server; the delete gets the refusal it would have got as a warning.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{auditing(guardLock("forge", "watch", "Stack", "forge", ""))}},
			cache:  []lockv1alpha1.Lock{auditing(guardLock("forge", "watch", "Stack", "forge", ""))},
			req:    namespaceRequest("forge"),
			want: guardResult{Result: result{Allowed: true, Code: http.StatusOK},
				Warnings: []string{WouldDenyWarning(nsDenied + "[watch]" + nsTail + "(watch: Stack/forge)")}},
		},
		"CRDAuditOnly": {
			reason: "Nor the CRD of its kind, with the same warning.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{auditing(guardLock("edge", "w", "Widget", "w2", ""))}},
			cache:  []lockv1alpha1.Lock{auditing(guardLock("edge", "w", "Widget", "w2", ""))},
			req:    crdRequest(lockv1alpha1.Group, "Widget"),
			want: guardResult{Result: result{Allowed: true, Code: http.StatusOK},
				Warnings: []string{WouldDenyWarning(crdDenied + "[edge/w]" + crdTail + "(edge/w: Widget/w2)")}},
		},
		"LockCRDAuditOnly": {
			reason: "Nor the Lock CRD, when every live Lock is in Audit enforcement, in the cache and the API server, with the same warning.",
			api:    &fakeAPI{locks: []lockv1alpha1.Lock{auditing(guardLock("forge", "watch", "Stack", "forge", ""))}},
			cache:  []lockv1alpha1.Lock{auditing(guardLock("forge", "watch", "Stack", "forge", ""))},
			req:    crdRequest(lockv1alpha1.Group, "Lock"),
			want: guardResult{Result: result{Allowed: true, Code: http.StatusOK},
				Warnings: []string{WouldDenyWarning(crdDenied + "[forge/watch]" + crdTail + "(forge/watch: Stack/forge); deleting the Lock CustomResourceDefinition would delete every Lock")}},
		},
		"LockCRDAuditAndEnforce": {
			reason: "An enforcing Lock past the cache's audit one still holds the Lock CRD back, read from the API server.",
			api:    &fakeAPI{locks: []lockv1alpha1.Lock{auditing(guardLock("forge", "watch", "Stack", "forge", "")), guardLock("forge", "zkeep", "Stack", "forge", "")}},
			cache:  []lockv1alpha1.Lock{auditing(guardLock("forge", "watch", "Stack", "forge", ""))},
			req:    crdRequest(lockv1alpha1.Group, "Lock"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[forge/zkeep]" + crdTail + "(forge/zkeep: Stack/forge); deleting the Lock CustomResourceDefinition would delete every Lock"}},
		},
		"NamespaceKindGone": {
			reason: "A kind whose list is NotFound (its CRD just deleted, or served in another version than the RESTMapper's) is a kind the mapper does not know: its Locks count unless their status says their target is missing, and the delete is refused naming the Locks, not for want of that list.",
			api:    &fakeAPI{objects: objects, gone: map[schema.GroupKind]bool{widgetGK: true}},
			cache:  []lockv1alpha1.Lock{guardLock("forge", "keep", "Stack", "forge", ""), guardLock("forge", "w", "Widget", "w1", "")},
			req:    namespaceRequest("forge"),
			want:   guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied + "[keep w]" + nsTail + "(keep: Stack/forge; w: Widget/w1)"}},
		},
		"NamespaceCacheTargetGone": {
			reason: "A cached Lock whose target the API server no longer has does not deny.",
			api:    &fakeAPI{objects: map[schema.GroupKind]map[string]map[string]bool{}},
			cache:  []lockv1alpha1.Lock{guardLock("forge", "keep", "Stack", "forge", "")},
			req:    namespaceRequest("forge"),
			want:   guardResult{Result: result{Allowed: true, Code: http.StatusOK}},
		},
		"CRDFromCache": {
			reason: "A cached Lock on an existing object of the kind denies the CRD.",
			api:    &fakeAPI{objects: objects},
			cache:  []lockv1alpha1.Lock{guardLock("edge", "w", "Widget", "w2", ""), guardLock("forge", "s", "Stack", "forge", "")},
			req:    crdRequest(lockv1alpha1.Group, "Widget"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[edge/w]" + crdTail + "(edge/w: Widget/w2)"}},
		},
		"CRDManyNamespaces": {
			reason: "Locks spread over many namespaces: the CRD guard stops checking targets once it can name ten, and counts the rest.",
			api:    spread,
			cache:  spreadCache,
			req:    crdRequest(lockv1alpha1.Group, "Widget"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[t00/keep t01/keep t02/keep t03/keep t04/keep t05/keep t06/keep t07/keep t08/keep t09/keep and 2 more]" + crdTail +
					"(" + strings.Join(spreadDescription, "; ") + "); list them all with: kubectl get locks -A"}},
		},
		"LockCRDFromCache": {
			reason: "A cached live Lock holds the Lock CRD back.",
			api:    &fakeAPI{err: errors.New("must not be read")},
			cache:  []lockv1alpha1.Lock{guardLock("forge", "any", "Stack", "absent", "")},
			req:    crdRequest(lockv1alpha1.Group, "Lock"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[forge/any]" + crdTail + "(forge/any: Stack/absent); deleting the Lock CustomResourceDefinition would delete every Lock"}},
		},
		"LockCRDManyFromCache": {
			reason: "Of many cached live Locks the Lock CRD's denial names the first ten, and counts the others.",
			api:    &fakeAPI{err: errors.New("must not be read")},
			cache:  many.locks,
			req:    crdRequest(lockv1alpha1.Group, "Lock"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[big/lock-s00 big/lock-s01 big/lock-s02 big/lock-s03 big/lock-s04 big/lock-s05 big/lock-s06 big/lock-s07 big/lock-s08 big/lock-s09 and 5 more]" + crdTail +
					"(" + strings.ReplaceAll(manyDescription(), "lock-s", "big/lock-s") + "); list them all with: kubectl get locks -A; deleting the Lock CustomResourceDefinition would delete every Lock"}},
		},
		"LockCRDManyFromAPI": {
			reason: "Listing the API server's Locks, the Lock CRD's denial names the first ten and counts the others, as from the cache.",
			api:    many,
			req:    crdRequest(lockv1alpha1.Group, "Lock"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[big/lock-s00 big/lock-s01 big/lock-s02 big/lock-s03 big/lock-s04 big/lock-s05 big/lock-s06 big/lock-s07 big/lock-s08 big/lock-s09 and 5 more]" + crdTail +
					"(" + strings.ReplaceAll(manyDescription(), "lock-s", "big/lock-s") + "); list them all with: kubectl get locks -A; deleting the Lock CustomResourceDefinition would delete every Lock"}},
		},
		"NamespaceLocked": {
			reason: "A namespace holding a live Lock on an existing object is denied, naming the Lock, its target and reason; the Locks that protect nothing are not named.",
			api: &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{
				guardLock("forge", "keep", "Stack", "forge", "prod"),
				guardLock("forge", "gone", "Stack", "absent", ""),
				guardLock("forge", "leaving", "Stack", "going", ""),
				deleting(guardLock("forge", "deleted", "Stack", "forge", "")),
				reported(guardLock("forge", "invalid", "ConfigMap", "x", ""), lockv1alpha1.ReasonMissingReference),
				guardLock("other", "elsewhere", "Stack", "forge", ""),
			}},
			req:  namespaceRequest("forge"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied + "[keep]" + nsTail + "(keep: Stack/forge: prod)"}},
		},
		"NamespaceDryRun": {
			reason: "A dry run gets the same answer.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{guardLock("forge", "keep", "Stack", "forge", "")}},
			req:    dryRun,
			want:   guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied + "[keep]" + nsTail + "(keep: Stack/forge)"}},
		},
		"NamespaceTerminating": {
			reason: "A namespace already terminating is not blocked further.",
			api:    &fakeAPI{err: errors.New("must not be read")},
			req:    terminating,
			want:   guardResult{Result: result{Allowed: true, Code: http.StatusOK, Message: "the namespace is already terminating"}},
		},
		"NamespaceMissingTargets": {
			reason: "A namespace whose Locks all point at missing objects (or unserved or cluster-scoped kinds) is allowed with a warning.",
			api: &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{
				guardLock("forge", "b", "Stack", "absent", ""),
				reported(guardLock("forge", "a", "Gadget", "g", ""), lockv1alpha1.ReasonMissingReference),
				guardLock("forge", "c", "Region", "eu", ""),
			}},
			req: namespaceRequest("forge"),
			want: guardResult{Result: result{Allowed: true, Code: http.StatusOK},
				Warnings: []string{"namespace forge holds Lock(s) [a b c] whose targets do not exist: they protect nothing"}},
		},
		"NamespaceUnmappedKindActive": {
			reason: "A kind lockguard's RESTMapper does not know (a version of the group it has not discovered) is no proof of a missing target: an active Lock denies.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{reported(guardLock("forge", "a", "Gadget", "g", ""), lockv1alpha1.ReasonActive)}},
			req:    namespaceRequest("forge"),
			want:   guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied + "[a]" + nsTail + "(a: Gadget/g)"}},
		},
		"NamespaceUnmappedKindNoStatus": {
			reason: "Nor is it for a Lock the reconciler has not reported on yet: it denies.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{guardLock("forge", "a", "Gadget", "g", "")}},
			req:    namespaceRequest("forge"),
			want:   guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied + "[a]" + nsTail + "(a: Gadget/g)"}},
		},
		"CRDUnmappedKindActive": {
			reason: "The CRD of a kind the RESTMapper does not know is denied while an active Lock targets an object of it.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{reported(guardLock("forge", "a", "Gadget", "g", ""), lockv1alpha1.ReasonActive)}},
			req:    crdRequest(lockv1alpha1.Group, "Gadget"),
			want:   guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: crdDenied + "[forge/a]" + crdTail + "(forge/a: Gadget/g)"}},
		},
		"NamespaceWithoutLocks": {
			reason: "A namespace without Locks is allowed.",
			api:    &fakeAPI{objects: objects},
			req:    namespaceRequest("forge"),
			want:   guardResult{Result: result{Allowed: true, Code: http.StatusOK}},
		},
		"NamespaceManyLocks": {
			reason: "A namespace with many Locks gets a short message: ten names, how many more, and how to list them.",
			api:    many,
			req:    namespaceRequest("big"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: nsDenied +
				"[lock-s00 lock-s01 lock-s02 lock-s03 lock-s04 lock-s05 lock-s06 lock-s07 lock-s08 lock-s09 and 5 more]" + nsTail +
				"(" + manyDescription() + ")" +
				"; list them all with: kubectl get locks -n big"}},
		},
		"NamespaceAPIError": {
			reason: "When the API server cannot be read, the delete is refused (fail closed).",
			api:    &fakeAPI{err: errors.New("connection refused")},
			req:    namespaceRequest("forge"),
			want: guardResult{Result: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify the Locks of namespace forge, so its delete is refused; retry when lockguard is ready: listing Locks from the API server: connection refused"}},
		},
		"CRDLocked": {
			reason: "The CRD of a kind with a locked existing object is denied, naming the Locks as namespace/name.",
			api: &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{
				guardLock("forge", "w", "Widget", "w1", "keep"),
				guardLock("edge", "w", "Widget", "w2", ""),
				guardLock("edge", "none", "Widget", "absent", ""),
				guardLock("forge", "stack", "Stack", "forge", ""),
			}},
			req: crdRequest(lockv1alpha1.Group, "Widget"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[edge/w forge/w]" + crdTail + "(edge/w: Widget/w2; forge/w: Widget/w1: keep)"}},
		},
		"CRDDeletecollection": {
			reason: "A deletecollection names the CRD in oldObject only, and gets the same answer.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{guardLock("forge", "w", "Widget", "w1", "")}},
			req:    deletecollection,
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[forge/w]" + crdTail + "(forge/w: Widget/w1)"}},
		},
		"CRDUnlocked": {
			reason: "The CRD of a kind whose Locks all point at missing objects is allowed, with a warning naming them.",
			api:    &fakeAPI{objects: objects, locks: []lockv1alpha1.Lock{guardLock("forge", "none", "Widget", "absent", ""), guardLock("forge", "s", "Stack", "forge", "")}},
			req:    crdRequest(lockv1alpha1.Group, "Widget"),
			want: guardResult{Result: result{Allowed: true, Code: http.StatusOK},
				Warnings: []string{"Lock(s) [forge/none] target Widget objects that do not exist: they protect nothing"}},
		},
		"CRDOtherGroup": {
			reason: "A CRD of another group is allowed without a read.",
			api:    &fakeAPI{err: errors.New("must not be read")},
			req:    crdRequest("example.com", "Widget"),
			want:   guardResult{Result: result{Allowed: true, Code: http.StatusOK, Message: "not a core.navique.com CustomResourceDefinition, nor one of an opted-in kind"}},
		},
		"LockCRD": {
			reason: "The Lock CRD is denied while any live Lock exists, target or not.",
			api:    &fakeAPI{locks: []lockv1alpha1.Lock{guardLock("forge", "any", "Stack", "absent", ""), deleting(guardLock("forge", "old", "Stack", "x", ""))}},
			req:    crdRequest(lockv1alpha1.Group, "Lock"),
			want: guardResult{Result: result{Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
				Message: crdDenied + "[forge/any]" + crdTail + "(forge/any: Stack/absent); deleting the Lock CustomResourceDefinition would delete every Lock"}},
		},
		"LockCRDNoLocks": {
			reason: "The Lock CRD is allowed once no live Lock exists.",
			api:    &fakeAPI{locks: []lockv1alpha1.Lock{deleting(guardLock("forge", "old", "Stack", "x", ""))}},
			req:    crdRequest(lockv1alpha1.Group, "Lock"),
			want:   guardResult{Result: result{Allowed: true, Code: http.StatusOK}},
		},
		"CRDAPIError": {
			reason: "When the API server cannot be read, the CRD delete is refused (fail closed).",
			api:    &fakeAPI{err: errors.New("timeout")},
			req:    crdRequest(lockv1alpha1.Group, "Widget"),
			want: guardResult{Result: result{Code: http.StatusServiceUnavailable, Reason: metav1.StatusReasonServiceUnavailable,
				Message: "lockguard could not verify the Locks on CustomResourceDefinition widgets.core.navique.com, so its delete is refused; retry when lockguard is ready: listing Locks from the API server: timeout"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cache := &countingCache{locks: tc.cache}
			h := NewHandler(Config{Locks: withCache{cache, noLookup(t)}, Cluster: &ClusterConfig{API: tc.api, Kinds: guardMapper()}})
			resp := h.Decide(context.Background(), tc.req)
			got := guardResult{Result: resultOf(resp), Warnings: resp.Warnings}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nDecide(...): -want, +got:\n%s", tc.reason, diff)
			}
			if len(tc.api.lists) > maxNamed {
				t.Errorf("%s\nDecide(...) listed the targets of %d namespaces, want at most %d", tc.reason, len(tc.api.lists), maxNamed)
			}
		})
	}
}

// manyDescription is the description of the first ten Locks of the
// NamespaceManyLocks case: reasons cut to maxReasonLen runes.
func manyDescription() string {
	var parts []string
	for i := range 10 {
		parts = append(parts, fmt.Sprintf("lock-s%02d: Stack/s%02d: %s...", i, i, strings.Repeat("x", maxReasonLen)))
	}
	return strings.Join(parts, "; ")
}

// TestGuardsUnconfigured: a handler without WithClusterGuards refuses
// Namespace and CRD deletes rather than allowing them.
func TestGuardsUnconfigured(t *testing.T) {
	h := NewHandler(Config{Locks: noLookup(t)})
	for _, req := range []Request{namespaceRequest("forge"), crdRequest(lockv1alpha1.Group, "Widget")} {
		if got := resultOf(h.Decide(context.Background(), req)); got.Allowed || got.Code != http.StatusServiceUnavailable {
			t.Errorf("Decide(%s): %+v, want ServiceUnavailable", req.Kind.Kind, got)
		}
	}
}

// blockingAPI serves fakeAPI's lists once released, telling entered of
// each list it holds.
type blockingAPI struct {
	fakeAPI
	entered chan struct{}
	release chan struct{}
}

func (b *blockingAPI) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	b.entered <- struct{}{}
	select {
	case <-b.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.fakeAPI.List(ctx, list, opts...)
}

// TestGuardsBoundTheirDecisions: at most maxClusterDecisions Namespace or
// CRD decisions run at once (each holds copies of Locks); one more
// waits for a slot until its deadline, then fails closed, and is decided
// once a slot is free.
func TestGuardsBoundTheirDecisions(t *testing.T) {
	api := &blockingAPI{fakeAPI: fakeAPI{objects: map[schema.GroupKind]map[string]map[string]bool{stackGK: {}}},
		entered: make(chan struct{}, maxClusterDecisions+1), release: make(chan struct{})}
	h := NewHandler(Config{Locks: noLookup(t), Cluster: &ClusterConfig{API: api, Kinds: guardMapper()}})
	done := make(chan admission.Response, maxClusterDecisions)
	for i := range maxClusterDecisions {
		// A namespace each: decisions of one namespace share its list.
		go func() { done <- h.Decide(context.Background(), namespaceRequest(fmt.Sprintf("forge-%d", i))) }()
	}
	for range maxClusterDecisions {
		<-api.entered
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	got := resultOf(h.Decide(ctx, crdRequest(lockv1alpha1.Group, "Widget")))
	if got.Allowed || got.Code != http.StatusServiceUnavailable || !strings.Contains(got.Message, "deciding 4 namespace or CRD deletes already") {
		t.Errorf("a decision over the bound: %+v, want ServiceUnavailable saying so", got)
	}
	if n := len(api.entered); n != 0 {
		t.Errorf("%d lists started past the bound, want 0", n)
	}
	close(api.release)
	for range maxClusterDecisions {
		if r := <-done; !r.Allowed {
			t.Errorf("a decision within the bound: %+v, want allowed (no Locks)", r.Result)
		}
	}
	go func() {
		for range api.entered {
		}
	}()
	if r := h.Decide(context.Background(), namespaceRequest("forge")); !r.Allowed {
		t.Errorf("a decision after the others ended: %+v, want allowed", r.Result)
	}
}
